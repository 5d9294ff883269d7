"""The store's key map: every prefix and key model-release writes, relative to the store root.

One place names them, and every module builds its keys here, so a reader finds the whole layout
(and a change to it) in one file. :data:`PREFIXES` lists the top-level prefixes; the package
docstring (:mod:`model_release.store`) describes each, and a unit test checks that they agree::

    releases/<release_id>/...                 a release (models, reports, release.json, _COMPLETE)
    channels/<channel>.json                   a channel's pointer
    channels/<channel>.html                   the channel's history page
    history/<channel>/<seq:010d>.json         one entry per pointer move
    ledger/<channel>/<model>/<version>.json   which versions a channel released, rejected or claims
    rejected/<release_id>/...                 a rejected candidate's reports and record
    workspaces/<release_id>/<stage>/...       the release workspaces a distributed run publishes
    serving/<channel>/versions.json           the Triton version numbers the channel's fleet serves
    serving/<channel>/lock.json               the channel's roll-out lock (a lease its holder renews)
    serving/<channel>/plan.json               the desired state the serving agents follow (the roll-out's plan)
    serving/<channel>/agents/<server>.json    one serving agent's state: release served, versions, heartbeat
    rollouts/<channel>/<seq>.json             one record per roll-out
    .locks/                                   the local-folder store's lock files

The workspace mirror is opened on a root of its own (by convention ``<bucket>/workspaces``), so
its keys are built relative to that root by :func:`workspace_stage_prefix` and
:func:`workspace_owner_key`.
"""

from __future__ import annotations

from ..names import check_channel, check_release_id

RELEASES = "releases/"
CHANNELS = "channels/"
HISTORY = "history/"
LEDGER = "ledger/"
REJECTED = "rejected/"
WORKSPACES = "workspaces/"
SERVING = "serving/"
ROLLOUTS = "rollouts/"
LOCKS = ".locks/"

#: every top-level prefix the store writes, in the order the package docstring lists them
PREFIXES = (RELEASES, CHANNELS, HISTORY, LEDGER, REJECTED, WORKSPACES, SERVING, ROLLOUTS, LOCKS)

#: a release's manifest and its completion record, under ``releases/<release_id>/``
MANIFEST = "release.json"
MARKER = "_COMPLETE"
#: a rejected candidate's record, under ``rejected/<release_id>/``
REJECTED_RECORD = "rejected.json"
#: a published workspace stage's index, and a workspace's claim, under the mirror's root
WORKSPACE_INDEX = ".published.json"
WORKSPACE_OWNER = ".owner"
#: where the S3 backend's write check starts (and aborts) its probe upload: never a release id
WRITE_PROBE = f"{RELEASES}.check-writable/"


def release_prefix(release_id: str) -> str:
    """``releases/<release_id>/`` (the id is the caller's: it is checked where it enters)."""
    return f"{RELEASES}{release_id}/"


def channel_key(channel: str) -> str:
    """``channels/<channel>.json``, the pointer."""
    return f"{CHANNELS}{check_channel(channel)}.json"


def page_key(channel: str) -> str:
    """``channels/<channel>.html``, the channel's history page."""
    return f"{CHANNELS}{check_channel(channel)}.html"


def channel_of(key: str) -> str | None:
    """The channel a ``channels/<channel>.json`` key names, or None for any other key."""
    if key.startswith(CHANNELS) and key.endswith(".json"):
        return key[len(CHANNELS):-len(".json")]
    return None


def history_prefix(channel: str) -> str:
    """``history/<channel>/``, the channel's move records."""
    return f"{HISTORY}{check_channel(channel)}/"


def history_key(channel: str, seq: int) -> str:
    """``history/<channel>/<seq, 10 digits>.json``."""
    return f"{history_prefix(channel)}{seq:010d}.json"


def history_seq(key: str) -> int | None:
    """The move number a history key carries, or None when the key is not one."""
    name = key.rsplit("/", 1)[-1]
    return int(name[:-5]) if name.endswith(".json") and name[:-5].isdigit() else None


def ledger_key(channel: str, model: str, version: str | int) -> str:
    """``ledger/<channel>/<model>/<version>.json``."""
    return f"{LEDGER}{channel}/{model}/{version}.json"


def rejected_prefix(release_id: str) -> str:
    """``rejected/<release_id>/`` (the id is checked)."""
    return f"{REJECTED}{check_release_id(release_id)}/"


def workspace_stage_prefix(release_id: str, stage: str) -> str:
    """``<release_id>/<stage>/`` under the workspace mirror's root."""
    return f"{release_id}/{stage}/"


def workspace_owner_key(release_id: str) -> str:
    """``<release_id>/.owner`` under the workspace mirror's root."""
    return f"{release_id}/{WORKSPACE_OWNER}"


def serving_versions_key(channel: str) -> str:
    """``serving/<channel>/versions.json``, the channel's Triton version map."""
    return f"{SERVING}{check_channel(channel)}/versions.json"


def rollout_lock_key(channel: str) -> str:
    """``serving/<channel>/lock.json``, the channel's roll-out lock."""
    return f"{SERVING}{check_channel(channel)}/lock.json"


def rollouts_prefix(channel: str) -> str:
    """``rollouts/<channel>/``, the channel's roll-out records."""
    return f"{ROLLOUTS}{check_channel(channel)}/"


def serving_plan_key(channel: str) -> str:
    """``serving/<channel>/plan.json``, the desired state of the channel's serving agents."""
    return f"{SERVING}{check_channel(channel)}/plan.json"


def serving_agents_prefix(channel: str) -> str:
    """``serving/<channel>/agents/``, one state document per serving agent."""
    return f"{SERVING}{check_channel(channel)}/agents/"


def serving_agent_key(channel: str, server: str) -> str:
    """``serving/<channel>/agents/<server>.json``, one agent's state (the server name is checked by its caller)."""
    return f"{serving_agents_prefix(channel)}{server}.json"
