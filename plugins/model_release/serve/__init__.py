"""The serving fleet: roll a channel's release out to serving Tritons, wave by wave, and back.

Modules: :mod:`.fleet` (which servers serve which channel), :mod:`.versions` (the Triton version
numbers each release gets, from the store's history), :mod:`.server_repo` (a server's own model
repository: version folders, configs, pins), :mod:`.triton_ops` (what the roll-out asks a serving
Triton), :mod:`.rollout` (reconcile each server to the channel pointer), :mod:`.lock` (one roll-out
per fleet), :mod:`.warmup`, :mod:`.status`, :mod:`.record`, and the subpackage :mod:`.watch` (the
watch after each wave: metrics reader, reset-safe deltas, probes, rules, the wave loop). Core only: nothing here imports airflow.
"""
