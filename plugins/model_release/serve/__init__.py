"""The serving fleet: an agent beside each Triton serves what the channel's plan says; a roll-out moves the plan.

Modules, from a server outwards: :mod:`.control` (what an agent asks its Triton, over gRPC),
:mod:`.server_repo` (a server's own model repository: version folders, configs, pins),
:mod:`.release_cache` (released models fetched and verified once per content), :mod:`.versions` (the
Triton version numbers each release gets, from the store's history), :mod:`.converge` (make one Triton
serve one release: side by side or in place, warm-up, the pinned switch), :mod:`.warmup`,
:mod:`.agent` and :mod:`.agent_http` (the agent's loop, its readiness endpoint), :mod:`.membership`
(each agent's state and heartbeat: who is in the fleet), :mod:`.plan` (the desired state the agents
follow), :mod:`.memory`, :mod:`.preflight` (what a roll-out checks before anything moves),
:mod:`.lock` (one roll-out per channel: a renewed lease), :mod:`.rollout` (the plan moved step by
step), :mod:`.guard` and the subpackage :mod:`.watch` (the watch after each step: metrics reader,
reset-safe deltas, probes, rules, the loop), :mod:`.record`, :mod:`.status`, :mod:`.stage`,
:mod:`.cli`, :mod:`.local_server` (the local stack's serving process). Core only: nothing here imports airflow.
"""
