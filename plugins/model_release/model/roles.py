"""Output roles, and the one rule for what counts as a label output.

A role says what an output *is*, whatever it is called: the class scores of a classifier, its
predicted label, a regressor's prediction, an embedding model's vectors, which member of a cascade
answered. The native
adapters (:mod:`model_release.model.native`) and the converters name their outputs after roles; the
assembler records in its result which served output plays which role
(``AssembleResult.roles``), and every later stage reads that instead of guessing from names.

A *label output* holds classes, not quantities: it is compared by agreement, never by a numeric
tolerance. The rule is the Triton data type (:func:`is_label_datatype`); a numpy array is judged
by the Triton type its dtype maps to (:func:`is_label_array`).
"""

from __future__ import annotations

from typing import Any

#: class scores per row (FP32 [N, classes]) of a classifier
PROBABILITIES = "probabilities"
#: the predicted class of each row: class values natively, label names when served (BYTES [N, top_k])
LABEL = "label"
#: a regressor's prediction ([N, k])
VARIABLE = "variable"
#: the cascade member that answered each row (BYTES [N, 1])
ANSWERED_BY = "answered_by"
#: an embedding model's vector per row ([N, d]), judged as a vector against the champion's
EMBEDDING = "embedding"
#: a classifier's raw class scores before its softmax ([N, classes]); served through the postprocess as probabilities
LOGITS = "logits"

#: Triton data types whose values name classes rather than measure something
LABEL_DATATYPES = frozenset({"BOOL", "BYTES", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"})


def is_label_datatype(datatype: str) -> bool:
    """Whether a tensor of this Triton data type is compared by agreement (classes), not tolerance."""
    return datatype in LABEL_DATATYPES


def is_label_array(array: Any) -> bool:
    """:func:`is_label_datatype` for a numpy array (strings and objects are BYTES)."""
    import numpy as np

    from .dtypes import triton_from_numpy

    dtype = np.asarray(array).dtype
    if dtype.kind in "USO":
        return True
    if dtype.kind in "fc":
        return False
    return is_label_datatype(triton_from_numpy(dtype, what="an output"))
