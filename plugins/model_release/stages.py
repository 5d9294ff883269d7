"""The release's stages, named once: the pipeline's stage names, the release DAG's task ids, the
workspace folders the stages write, and the ``stage`` of an error.

A release runs :data:`STAGES` in order; the DAG adds :data:`START` (claim a model version) and
:data:`FINISH` (settle the claim). Each stage writes the workspace folder of its own name, except
the assemble stage, whose folder is the Triton repository it builds (:data:`REPOSITORY`). This
module imports nothing: DAG files import it at parse time.
"""

from __future__ import annotations

INTAKE = "intake"
EXPORT = "export"
TENSORRT = "tensorrt"
ASSEMBLE = "assemble"
CANARY = "canary"
PROMOTE = "promote"

#: the stages in the order a release runs them
STAGES = (INTAKE, EXPORT, TENSORRT, ASSEMBLE, CANARY, PROMOTE)

#: the release DAG's tasks before and after the stages
START = "start"
FINISH = "finish"
#: after promote: the channel's serving fleet made to match the pointer (:mod:`model_release.serve`)
ROLLOUT = "rollout"

#: the assemble stage's workspace folder: the Triton repository
REPOSITORY = "repository"

#: the workspace folder each stage writes, in stage order
FOLDERS = {stage: REPOSITORY if stage == ASSEMBLE else stage for stage in STAGES}
STAGE_FOLDERS = tuple(FOLDERS.values())
