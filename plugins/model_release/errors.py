"""The one error hierarchy of model-release.

Every message says what failed, the bad value, what would be valid, and what to do. User
mistakes (a bad spec, a model that cannot be converted or does not match its reference) are kept
apart from infrastructure failures (a server that is down, a store that refuses a write), so that
an operator knows whether to fix the input or retry::

    ModelReleaseError
    ├── UserError                  the input must change; retrying will not help
    │   ├── SpecError              the release spec is malformed or inconsistent
    │   ├── IntakeError            no such model / alias / version, no signature, unsupported flavor
    │   ├── ExportError            the model could not be converted or the ONNX file is invalid
    │   ├── GateError              a gate refused the release (parity, lint, canary): it is blocked
    │   │   ├── ParityError        converted outputs differ from the reference beyond tolerance
    │   │   ├── LintError          the assembled repository has errors Triton would reject
    │   │   └── CanaryRejected     the canary's outputs, timings or expectations failed
    │   └── AssembleError          the template and the spec or model disagree
    ├── InfraError                 a service failed; retry once it is back
    │   ├── ServiceUnavailable     a server could not be reached or started
    │   ├── StoreError             the model store refused or corrupted an operation
    │   │   ├── ChecksumMismatch   an object in the store differs from the manifest
    │   │   └── ConflictError      a channel pointer moved meanwhile (another promotion won)
    │   └── GpuUnavailable         a stage that demands a GPU found none
    ├── Inconclusive               the evidence could not decide: neither blocked nor passed; try later
    │   ├── CanaryInconclusive     a canary gate's interval straddles its limit (and no gate failed)
    │   └── WatchInconclusive      the roll-out's watch could not judge a wave in its budget (serve.watch)
    └── ClaimHeld                  another live run is releasing this version (its claim in the channel's ledger)

GateError and Inconclusive both carry the stage's ``result`` when it produced one
(:class:`CarriesResult`), which the stage runner saves and the CLI reads the same way for both.

Exit codes (the CLI's): 1 any other error, 2 a user error, 3 a gate refused the release, 4 an
outage, 5 inconclusive, 6 the version is held by another live run. An inconclusive outcome is neither the input's fault nor a service's: it
is not retried at once (the same canary would measure the same noise) and never counted as a
rejection; the version stays open in the channel's ledger, and a later run (the Airflow canary
task reschedules itself, ``canary.inconclusive``) decides it.

Third-party exceptions are converted at the boundary (``raise XError(...) from exc``). Every
message is made safe where it is made (:func:`~model_release.safe_text.one_line`): credentials in
URIs are redacted, control characters escaped (a message is one line), its length capped.
"""

from __future__ import annotations

import copy

from .safe_text import one_line
from .stages import ASSEMBLE, CANARY, EXPORT, INTAKE


class ModelReleaseError(Exception):
    """Base of every error model-release raises on purpose."""

    #: a short, stable name for logs, reports and exit codes
    kind = "error"
    #: the process exit code the CLI uses for this kind of failure
    exit_code = 1

    def __init__(self, message: str, *, stage: str | None = None) -> None:
        super().__init__(one_line(message))
        self.stage = stage

    def __str__(self) -> str:  # "stage: message" reads well on one line in logs
        message = super().__str__()
        return f"{self.stage}: {message}" if self.stage and not message.startswith(self.stage + ":") else message

    @property
    def message(self) -> str:
        """The message without the stage prefix."""
        return super().__str__()

    def restated(self, message: str) -> "ModelReleaseError":
        """The same error (class, stage and every other attribute) with a new message.

        For adding context at a boundary without losing what the error carries
        (``ConflictError.winner``, ``.stage``): ``raise exc.restated(f"... {exc.message}") from None``.
        """
        clone = copy.copy(self)
        clone.args = (one_line(message),)
        return clone


class UserError(ModelReleaseError):
    kind = "user"
    exit_code = 2


class SpecError(UserError):
    kind = "spec"


class IntakeError(UserError):
    kind = INTAKE


class ExportError(UserError):
    kind = EXPORT


class AssembleError(UserError):
    kind = ASSEMBLE


class CarriesResult(ModelReleaseError):
    """An error that ends a stage which still produced a result (the canary's verdict and report
    paths): ``result``, which the pipeline's stage runner saves like any other result."""

    def __init__(self, message: str, *, stage: str | None = None, result: object | None = None) -> None:
        super().__init__(message, stage=stage)
        self.result = result


class GateError(CarriesResult, UserError):
    """A gate refused the release. The release is blocked and nothing is promoted."""

    kind = "gate"
    exit_code = 3


class ParityError(GateError):
    kind = "parity"


class LintError(GateError):
    kind = "lint"


class CanaryRejected(GateError):
    kind = CANARY


class InfraError(ModelReleaseError):
    kind = "infra"
    exit_code = 4


class ServiceUnavailable(InfraError):
    kind = "unavailable"


class StoreError(InfraError):
    kind = "store"


class ChecksumMismatch(StoreError):
    kind = "checksum"


class ConflictError(StoreError):
    """A conditional pointer write lost: someone else moved the channel since it was read."""

    kind = "conflict"

    def __init__(self, message: str, *, winner: str | None = None, stage: str | None = None) -> None:
        super().__init__(message, stage=stage)
        self.winner = winner


class GpuUnavailable(InfraError):
    kind = "gpu"


class Inconclusive(CarriesResult):
    """The evidence could not decide either way: nothing is promoted, nothing is rejected; its
    ``result`` is saved like a gate's refusal so later tasks read the report."""

    kind = "inconclusive"
    exit_code = 5


class CanaryInconclusive(Inconclusive):
    """A canary gate could not decide (its interval straddles its limit) and none failed.

    The message names each such gate and what would decide it (more window pairs or golden rows,
    a quieter canary); the report says the same.
    """

    kind = "canary_inconclusive"


class ClaimHeld(ModelReleaseError):
    """Another run that is still alive holds the claim on this model version (or member combination)
    in the channel's ledger: neither the input's fault nor an outage, and nothing was written. The
    message names that run and when it started; ``holder`` is its ledger entry."""

    kind = "held"
    exit_code = 6

    def __init__(self, message: str, *, holder: dict | None = None, stage: str | None = None) -> None:
        super().__init__(message, stage=stage)
        self.holder = holder
