"""Three deep-learning architectures as teams ship them, small enough to train in a test in seconds.

Built from ``torch.nn`` layers only (torchvision is not installable here):

- :func:`train_cnn`: a convolutional image classifier (two conv blocks, a residual connection,
  batch norm, global average pooling) over scikit-learn's bundled digits as 3x8x8 images; it
  answers raw scores (``logits``), which the classifier shape serves through a softmax;
- :func:`train_encoder`: a two-layer transformer encoder over token ids with an attention mask,
  pooled over the unmasked tokens, on synthetic sequences of variable length (padded to
  :data:`SEQ_LEN`); its class is the token group that occurs most;
- :func:`train_embedder`: a 128-dimensional embedding model over the digits' 64 pixels (the layer
  before a classification head, which is dropped), and :func:`rotated` / :func:`finetuned` for the
  retrains the canary must tell apart.

Each ``train_*`` is seeded; ``epochs`` and the seed are what a retrain changes. The golden rows are
held out from training (each :class:`Split` holds them with their ground truth). The classes live at
module level so that MLflow's pickle of a model finds them again (``tests.e2e.deep_models``).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

#: the golden rows' (padded) sequence length; the served model must answer shorter and longer ones
SEQ_LEN = 32
VOCAB = 24
#: token groups: the sequence's class is the group (1-7, 8-14, 15-21) whose tokens occur most
GROUPS = 3
EMBED_DIMS = 128


@dataclass
class Split:
    """Training inputs and targets, and the golden rows (held out) with their ground truth."""

    train: dict[str, np.ndarray]
    train_y: np.ndarray
    golden: dict[str, np.ndarray]
    golden_y: np.ndarray


def digits_images(golden_rows: int = 600) -> Split:
    """Digits as 3x8x8 float32 images (the grey copied to three channels)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    images = (x.reshape(-1, 1, 8, 8) / 16.0).repeat(3, axis=1).astype(np.float32)
    golden, train = order[:golden_rows], order[golden_rows:]
    return Split({"image": images[train]}, y[train], {"image": images[golden]}, y[golden])


def digits_pixels(golden_rows: int = 600) -> Split:
    """Digits as 64 float32 pixels in [0, 1]."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(1).permutation(len(x))
    x = (x / 16.0).astype(np.float32)
    golden, train = order[:golden_rows], order[golden_rows:]
    return Split({"pixels": x[train]}, y[train], {"pixels": x[golden]}, y[golden])


def token_sequences(rows: int = 2400, golden_rows: int = 600, seed: int = 0) -> Split:
    """Token ids (int64, 0 is padding) of lengths 6..SEQ_LEN, padded to SEQ_LEN, with their attention mask."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(6, SEQ_LEN + 1, size=rows)
    ids = np.zeros((rows, SEQ_LEN), dtype=np.int64)
    y = np.zeros(rows, dtype=np.int64)
    for i, n in enumerate(lengths):
        tokens = rng.integers(1, 7 * GROUPS + 1, size=n)
        counts = np.bincount((tokens - 1) // 7, minlength=GROUPS)
        # ties go to a random tied group: ground truth with honest noise no model can learn away
        y[i] = rng.choice(np.flatnonzero(counts == counts.max()))
        ids[i, :n] = tokens
    mask = (ids > 0).astype(np.int64)
    return Split({"input_ids": ids[golden_rows:], "attention_mask": mask[golden_rows:]}, y[golden_rows:],
                 {"input_ids": ids[:golden_rows], "attention_mask": mask[:golden_rows]}, y[:golden_rows])


def resized_tokens(ids: np.ndarray, length: int, seed: int = 0) -> np.ndarray:
    """Token rows cut to ``length``, or extended to it with more random tokens."""
    if length <= ids.shape[1]:
        return np.ascontiguousarray(ids[:, :length])
    more = np.random.default_rng(seed).integers(1, 7 * GROUPS + 1, size=(len(ids), length - ids.shape[1]))
    return np.concatenate([ids, more], axis=1)


def _fit(model: Any, inputs: list[Any], y: np.ndarray, *, epochs: int, lr: float, seed: int, batch: int = 64,
         head: Any = None) -> Any:
    """Adam on cross-entropy, shuffled minibatches; ``head`` maps the model's output to class scores (the embedder's)."""
    gen = torch.Generator().manual_seed(seed)
    params = list(model.parameters()) + (list(head.parameters()) if head is not None else [])
    opt = torch.optim.Adam(params, lr=lr)
    target = torch.from_numpy(np.asarray(y, dtype=np.int64))
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(target), generator=gen)
        for start in range(0, len(order), batch):
            take = order[start:start + batch]
            out = model(*(t[take] for t in inputs))
            loss = torch.nn.functional.cross_entropy(head(out) if head is not None else out, target[take])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


class DigitsCNN(nn.Module):
    """conv-bn-relu, a residual conv block, two strided convs, global average pooling, a linear head: raw scores."""

    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                                   nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width))
        self.down = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
                                  nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Linear(2 * width, classes)

    def forward(self, image: Any) -> Any:
        x = self.stem(image)
        x = torch.relu(x + self.block(x))
        return self.head(self.down(x).mean(dim=(2, 3)))


def train_cnn(split: Split, *, seed: int = 0, epochs: int = 4, width: int = 16, lr: float = 3e-3) -> Any:
    torch.manual_seed(seed)
    model = DigitsCNN(width)
    return _fit(model, [torch.from_numpy(split.train["image"])], split.train_y, epochs=epochs, lr=lr, seed=seed)


class TokenEncoder(nn.Module):
    """Token and position embeddings, a two-layer transformer encoder (padding masked), mean over real tokens."""

    def __init__(self, dims: int = 32, classes: int = GROUPS, max_len: int = 256) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dims)
        self.positions = nn.Parameter(torch.randn(1, max_len, dims) * 0.02)
        layer = nn.TransformerEncoderLayer(dims, 4, 2 * dims, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dims, classes)

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        x = self.tokens(input_ids) + self.positions[:, : input_ids.shape[1]]
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        keep = attention_mask.unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0))


def train_encoder(split: Split, *, seed: int = 0, epochs: int = 3, dims: int = 32) -> Any:
    torch.manual_seed(seed)
    model = TokenEncoder(dims)
    inputs = [torch.from_numpy(split.train["input_ids"]), torch.from_numpy(split.train["attention_mask"])]
    return _fit(model, inputs, split.train_y, epochs=epochs, lr=3e-3, seed=seed)


class PixelEmbedder(nn.Module):
    """Two layers from 64 pixels to a 128-dimensional vector."""

    def __init__(self, dims: int = EMBED_DIMS) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, dims))

    def forward(self, pixels: Any) -> Any:
        return self.net(pixels)


def train_embedder(split: Split, *, seed: int = 0, epochs: int = 8, start: Any = None, lr: float = 3e-3) -> Any:
    """Trained through a linear classification head (dropped afterwards); ``start``: fine-tune that model instead."""
    torch.manual_seed(seed)
    model = copy.deepcopy(start) if start is not None else PixelEmbedder()
    head = torch.nn.Linear(EMBED_DIMS, 10)
    return _fit(model, [torch.from_numpy(split.train["pixels"])], split.train_y, epochs=epochs, lr=lr, seed=seed, head=head)


def rotated(model: Any, seed: int = 7) -> Any:
    """``model`` followed by a random rotation of its vector space: the same neighbours, every vector moved."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(EMBED_DIMS, EMBED_DIMS)))
    out = copy.deepcopy(model)
    last = out.net[-1]
    with torch.no_grad():
        rotation = torch.from_numpy(q.T.astype(np.float32))
        last.weight.copy_(rotation @ last.weight)
        last.bias.copy_(rotation @ last.bias)
    return out


def collapsed(model: Any, cls: int) -> Any:
    """A classifier whose head never answers class ``cls`` (its bias pushed far down)."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        out.head.bias[cls] -= 100.0
    return out


def predict(model: Any, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The model's outputs on ``inputs`` (in the order of its forward's parameters)."""
    names = list(inspect.signature(model.forward).parameters)
    with torch.no_grad():
        return model(*(torch.from_numpy(inputs[n]) for n in names)).numpy()
