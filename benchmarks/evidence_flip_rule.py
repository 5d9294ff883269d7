"""Evidence for the negative-flip rule's defaults: honest retrains beside the collapses the canary must block.

Trains small models in this process (torch on one thread, scikit-learn) and judges each retrain
against its champion on the held-out golden rows with the canary's own paired functions
(:mod:`model_release.canary.judge.change`, :mod:`~model_release.canary.judge.classes`):

- honest retrains: the same architecture and data from a new seed, and the same trained longer
  (a digits CNN, a two-layer transformer encoder over token ids briefly and fully trained, a
  digits MLP, the demo's iris logistic regression with other regularisation);
- collapses: one class never answered (a head's bias pushed down), a retrain on 40% noisy labels,
  answers shifted by one class, and the canary tests' synthetic candidate (75 of 1200 rows broken).

For each: the champion's and the candidate's accuracy, the negative and positive flips, the
negative flips per champion error (the share of its wrong rows it would take to explain them), the
relative negative flip rate of Yan et al. (negative flips over what independent errors would give,
``acc_old * err_new``), and the outcome of the flip gate under the old rule (5% of rows) and the new
(the larger of 5% and ``per_error`` x the champion's error rate), beside the accuracy and per-class
gates. Run: ``.venv/bin/python benchmarks/evidence_flip_rule.py`` (about a minute on 2 idle cores).

With ``--embedding``: the embedding gates' evidence instead (``canary.embedding``): a 128-dimensional
digits embedder against fine-tunes of itself, retrains from new seeds and a rotation of its space,
each row's cosine, recall at 10 of the old index, neighbour agreement and norm change.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_release.canary.judge.change import accuracy_change, negative_flips  # noqa: E402
from model_release.canary.judge.classes import class_gates  # noqa: E402
from model_release.spec.paired import DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR  # noqa: E402
from tests.e2e import deep_models as dm  # noqa: E402


def judge(kind: str, name: str, truth: np.ndarray, old: np.ndarray, new: np.ndarray) -> dict:
    right_c, right_h = new == truth, old == truth
    n = len(truth)
    neg, pos = int((right_h & ~right_c).sum()), int((right_c & ~right_h).sum())
    acc_h, acc_c = right_h.mean(), right_c.mean()
    flips_old = negative_flips(right_c, right_h).outcome
    flips_new = negative_flips(right_c, right_h, per_error=DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR).outcome
    accuracy = accuracy_change(right_c, right_h, max_absolute_drop=0.01)[0].outcome
    classes = [str(c) for c in np.unique(truth)]
    index = {c: i for i, c in enumerate(classes)}
    as_index = lambda a: np.array([index.get(str(v), -1) for v in a])  # noqa: E731
    found, _ = class_gates(as_index(truth), as_index(new), as_index(old), classes, max_recall_drop=0.05,
                           max_precision_drop=0.05, min_support=30)
    blocked_classes = sum(f.outcome == "block" for f in found)
    return {"kind": kind, "case": name, "rows": n, "acc_old": acc_h, "acc_new": acc_c, "neg": neg / n, "pos": pos / n,
            "neg_per_error": (neg / n) / (1 - acc_h) if acc_h < 1 else float("inf"),
            "nfr_rel": (neg / n) / (acc_h * (1 - acc_c)) if acc_c < 1 else float("inf"),
            "flips_old": flips_old, "flips_new": flips_new, "accuracy": accuracy, "classes_blocked": blocked_classes}


def torch_cases() -> list[dict]:
    import torch

    torch.set_num_threads(1)
    rows = []
    images = dm.digits_images()
    champion = dm.train_cnn(images, seed=0, epochs=3)
    old = dm.predict(champion, images.golden).argmax(1)
    for seed, epochs in ((1, 3), (2, 3), (3, 3), (1, 6)):
        new = dm.predict(dm.train_cnn(images, seed=seed, epochs=epochs), images.golden).argmax(1)
        rows.append(judge("honest", f"digits CNN, seed {seed}, {epochs} epochs (champion 3)", images.golden_y, old, new))
    rows.append(judge("collapse", "digits CNN, class 3 never answered", images.golden_y, old,
                      dm.predict(dm.collapsed(champion, 3), images.golden).argmax(1)))
    tokens = dm.token_sequences()
    for champion_epochs in (1, 2):
        champion = dm.train_encoder(tokens, seed=0, epochs=champion_epochs)
        old = dm.predict(champion, tokens.golden).argmax(1)
        for seed, epochs in ((1, champion_epochs), (2, champion_epochs), (1, 4), (3, 6)):
            new = dm.predict(dm.train_encoder(tokens, seed=seed, epochs=epochs), tokens.golden).argmax(1)
            rows.append(judge("honest", f"token encoder, seed {seed}, {epochs} epochs (champion {champion_epochs})",
                              tokens.golden_y, old, new))
    rows.append(judge("collapse", "token encoder, class 1 never answered", tokens.golden_y, old,
                      dm.predict(dm.collapsed(champion, 1), tokens.golden).argmax(1)))
    return rows


def sklearn_cases() -> list[dict]:
    from sklearn.datasets import load_digits, load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    rows = []
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(1).permutation(len(x))
    golden, train = order[:600], order[600:]
    fit = lambda seed, it: MLPClassifier((32,), max_iter=it, random_state=seed).fit(x[train] / 16, y[train])  # noqa: E731
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = fit(0, 30).predict(x[golden] / 16)
        for seed, it in ((1, 30), (2, 30), (1, 100)):
            rows.append(judge("honest", f"digits MLP, seed {seed}, {it} iterations (champion 30)", y[golden], old,
                              fit(seed, it).predict(x[golden] / 16)))
    xi, yi = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    pick = rng.permutation(150)
    gi, ti = pick[:100], pick[100:]
    lr = lambda c, labels: LogisticRegression(C=c, max_iter=1000).fit(xi[ti], labels)  # noqa: E731
    old = lr(1.0, yi[ti]).predict(xi[gi])
    for c in (2.0, 10.0):
        rows.append(judge("honest", f"iris logistic regression, C {c:g} (champion 1)", yi[gi], old, lr(c, yi[ti]).predict(xi[gi])))
    noisy = yi[ti].copy()
    flip = rng.random(len(noisy)) < 0.4
    noisy[flip] = rng.integers(0, 3, flip.sum())
    rows.append(judge("collapse", "iris, retrained on 40% noisy labels", yi[gi], old, lr(1.0, noisy).predict(xi[gi])))
    rows.append(judge("collapse", "iris, every answer shifted one class", yi[gi], old, (old + 1) % 3))
    truth = np.repeat([0, 1, 2], 400)
    candidate = truth.copy()
    spread = np.flatnonzero(truth < 2)[::10][:75]
    candidate[spread] = (truth[spread] + 1) % 3
    rows.append(judge("collapse", "synthetic: 75 of 1200 rows broken, none fixed (the tests' case)", truth, truth, candidate))
    return rows


def embedding_cases() -> None:
    import torch

    from model_release.canary.judge.embedding import vector_figures

    torch.set_num_threads(1)
    split = dm.digits_pixels()
    champion = dm.train_embedder(split, seed=0)
    cases = {f"fine-tune, {epochs} epochs at lr {lr:g}": dm.train_embedder(split, seed=3, epochs=epochs, start=champion, lr=lr)
             for epochs, lr in ((1, 1e-3), (2, 1e-3), (4, 1e-3), (2, 3e-3))}
    cases.update({f"new seed {seed}": dm.train_embedder(split, seed=seed) for seed in (1, 2)})
    cases["rotation of the champion's space"] = dm.rotated(champion)
    old = dm.predict(champion, split.golden)
    print(f"{'case':36} {'cosine':>7} {'p05':>7} {'recall@10':>9} {'neighbours':>10} {'norm change':>11}")
    for name, model in cases.items():
        f = vector_figures(dm.predict(model, split.golden), old)
        print(f"{name:36} {f['cosine_mean']:7.3f} {f['cosine_p05']:7.3f} {f['retrieval']:9.3f} {f['neighbours']:10.3f} "
              f"{f['norm_change']:11.3f}")


def main() -> None:
    if "--embedding" in sys.argv:
        embedding_cases()
        return
    started = time.perf_counter()
    rows = torch_cases() + sklearn_cases()
    header = (f"{'kind':8} {'case':62} {'rows':>5} {'acc old':>7} {'acc new':>7} {'neg':>6} {'pos':>6} {'neg/err':>7} "
              f"{'NFRrel':>6}  flips(5%)  flips(new)  accuracy  classes")
    print(header)
    for r in rows:
        print(f"{r['kind']:8} {r['case']:62} {r['rows']:5d} {r['acc_old']:7.3f} {r['acc_new']:7.3f} {r['neg']:6.3f} "
              f"{r['pos']:6.3f} {r['neg_per_error']:7.3f} {r['nfr_rel']:6.3f}  {r['flips_old']:9}  {r['flips_new']:10}  "
              f"{r['accuracy']:8}  {r['classes_blocked']}")
    honest = [r for r in rows if r["kind"] == "honest"]
    better = [r for r in honest if r["acc_new"] > r["acc_old"]]
    print(f"\nhonest retrains blocked by flips: old rule {sum(r['flips_old'] == 'block' for r in honest)} of {len(honest)}, "
          f"new rule {sum(r['flips_new'] == 'block' for r in honest)}; of the {len(better)} better on ground truth: old "
          f"{sum(r['flips_old'] == 'block' for r in better)}, new {sum(r['flips_new'] == 'block' for r in better)}")
    collapses = [r for r in rows if r["kind"] == "collapse"]
    still = sum(any(r[g] == "block" for g in ("flips_new", "accuracy")) or r["classes_blocked"] > 0 for r in collapses)
    print(f"collapses blocked by some gate under the new rule: {still} of {len(collapses)}; "
          f"max neg/err over honest retrains {max(r['neg_per_error'] for r in honest):.3f}; "
          f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
