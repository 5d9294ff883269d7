"""What the repository's shape serves of the model, decided at export before anything is converted.

The ``classifier`` shape serves class scores, the ``embedding`` shape vectors: each needs one output
of the model that holds them (``repository.output``, else the output named after the role, else
the model's only floating output with one axis after the batch). :func:`plan` picks it from the
signature before the conversion, so a model the shape cannot serve is refused before any export
runs (a regressor for a classifier, three float outputs and no name); a model whose signature
names no outputs is decided on the converted file's outputs (:func:`choose`), still before parity.

A classifier's scores are probabilities or raw scores (logits); :func:`decide` says which
(``repository.scores``, or from the native answers on the first golden batch: rows in [0, 1] that
sum to 1 are probabilities). Raw scores are served through a softmax in the postprocess and judged
as probabilities: :func:`derived_reference` gives the reference the served model is compared with
where the native model does not answer it under the role's name (the softmax of raw scores, and the
top class), written into ``reference.npz`` beside the native outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import SpecError
from ..model.dtypes import FLOAT_TYPES
from ..model.roles import EMBEDDING, LABEL, LOGITS, PROBABILITIES
from ..spec import ReleaseSpec
from ..types import IntakeResult, TensorSpec

#: the shapes that serve one output of the model, and the role (and default output name) of it
SERVED_ROLE = {"classifier": PROBABILITIES, "embedding": EMBEDDING}
#: flavors whose native adapter names the outputs itself (``label``, ``probabilities``, ``variable``)
ESTIMATORS = ("sklearn", "xgboost", "lightgbm")
#: how far from 1 a row of probabilities may sum (float32 softmax rows are within 1e-6)
SUM_TOLERANCE = 1e-3


def plan(spec: ReleaseSpec, intake: IntakeResult) -> str | None:
    """The output the shape serves, from the signature; None: the shape serves every output, or the
    signature names none (then :func:`choose` decides on the converted outputs).

    Raises:
        SpecError: the shape cannot be served by this model (names what it has and what to set).
    """
    role = SERVED_ROLE.get(spec.repository.shape)
    if role is None:
        return None
    if intake.flavor in ESTIMATORS:
        if role == PROBABILITIES and intake.classes is not None:
            return PROBABILITIES
        kind = "classifier" if intake.classes is not None else "regressor"
        raise SpecError(f"repository.shape {spec.repository.shape!r} needs {_wants(role)}, but model {intake.model_name!r} is a "
                        f"{intake.flavor} {kind}; use repository.shape: single in {spec.where}")
    return choose(spec, intake.outputs, f"the MLflow signature of model {intake.model_name!r}") if intake.outputs else None


def choose(spec: ReleaseSpec, outputs: list[TensorSpec], where: str) -> str:
    """The output of ``outputs`` the shape serves (see the module docstring).

    Raises:
        SpecError: none fits, or the one named is not a floating vector.
    """
    role = SERVED_ROLE[spec.repository.shape]
    by_name = {n: o for o in outputs for n in (o.name, o.original_name)}
    named = spec.repository.output or role
    found = by_name.get(named)
    if found is None and spec.repository.output is None:
        vectors = [o for o in outputs if o.datatype in FLOAT_TYPES and len(o.dims) == 1]
        found = vectors[0] if len(vectors) == 1 else None
    listed = ", ".join(f"{o.name} ({o.datatype} {list(o.dims)})" for o in outputs)
    if found is None:
        given = f"repository.output {named!r} names none of them" if spec.repository.output else \
            f"none is named {role!r} and {'none' if not outputs else 'more than one'} is a floating vector"
        raise SpecError(f"repository.shape {spec.repository.shape!r} serves {_wants(role)}; the outputs of {where} are "
                        f"{listed or 'none'}: {given}. Set repository.output to the output that holds them in {spec.where}")
    if found.datatype not in FLOAT_TYPES or len(found.dims) != 1:
        raise SpecError(f"output {found.name!r} of {where} is {found.datatype} {list(found.dims)}, not one floating vector per "
                        f"row; repository.shape {spec.repository.shape!r} serves {_wants(role)}. Name another output in "
                        f"repository.output, or use repository.shape: single in {spec.where}")
    return found.name


def _wants(role: str) -> str:
    return "class scores (one floating vector per row)" if role == PROBABILITIES else "vectors (one floating vector per row)"


def decide(spec: ReleaseSpec, output: str, answers: np.ndarray | None) -> dict[str, str]:
    """The head the shape serves: ``{"output", "role", "why"}``; a classifier's role is probabilities or logits.

    ``answers``: the native model's ``output`` on the first golden batch (needed for ``scores: auto``).
    """
    role = SERVED_ROLE[spec.repository.shape]
    if role == EMBEDDING:
        return {"output": output, "role": EMBEDDING, "why": "repository.shape: embedding"}
    if spec.repository.scores != "auto":
        return {"output": output, "role": LOGITS if spec.repository.scores == "logits" else PROBABILITIES,
                "why": f"repository.scores: {spec.repository.scores}"}
    rows = np.asarray(answers, dtype=np.float64).reshape(len(answers), -1)
    sums = rows.sum(axis=1)
    if np.all((rows >= 0) & (rows <= 1)) and np.all(np.abs(sums - 1) <= SUM_TOLERANCE):
        return {"output": output, "role": PROBABILITIES, "why": f"its {len(rows)} first golden rows are in [0, 1] and sum to 1"}
    return {"output": output, "role": LOGITS, "why": (f"its {len(rows)} first golden rows sum to {sums.min():.4g}..{sums.max():.4g}"
                                                      f"{'' if rows.min() >= 0 else ' and hold negative scores'}, not "
                                                      "probabilities: served through a softmax (repository.scores: auto)")}


def head_of(spec: ReleaseSpec, outputs: list[TensorSpec], planned: str | None, cached: Mapping[str, str],
            answers: Callable[[str], np.ndarray]) -> dict[str, str]:
    """The head of the converted file: its output (``planned`` from the signature, else :func:`choose` on ``outputs``)
    and :func:`decide`'s role; ``cached``: what this conversion's cache entry decided, reused when it still holds;
    ``answers(output)``: the native answers on the first golden batch, asked only when a classifier's scores must be
    told apart. {} for a shape that serves every output."""
    if spec.repository.shape not in SERVED_ROLE:
        return {}
    output = planned if planned in {o.name for o in outputs} else choose(spec, outputs, "the converted ONNX file")
    if cached and cached.get("output") == output and cached.get("scores") == spec.repository.scores:
        return dict(cached)
    needs = spec.repository.shape == "classifier" and spec.repository.scores == "auto"
    return {**decide(spec, output, answers(output) if needs else None), "scores": spec.repository.scores}


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64, returned in the scores' float type (what the postprocess computes)."""
    z = np.asarray(scores, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.asarray(scores).dtype if np.asarray(scores).dtype.kind == "f" else np.float32)


def derived_reference(head: Mapping[str, str], native: Mapping[str, np.ndarray], classes: list[Any] | None) -> dict[str, np.ndarray]:
    """What a classifier head is compared with when served, where the native model does not answer it itself:
    ``probabilities`` (the softmax of raw scores, or the scores under their own name) and ``label`` (the top class)."""
    if head.get("role") not in (PROBABILITIES, LOGITS):
        return {}
    scores = np.asarray(native[head["output"]])
    out: dict[str, np.ndarray] = {}
    if head["role"] == LOGITS:
        out[PROBABILITIES] = softmax(scores)
    elif head["output"] != PROBABILITIES:
        out[PROBABILITIES] = scores
    if LABEL not in native:
        top = scores.argmax(axis=-1)
        out[LABEL] = np.asarray(classes)[top] if classes is not None else top.astype(np.int64)
    return out
