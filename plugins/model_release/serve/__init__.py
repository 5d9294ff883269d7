"""The serving fleet: roll-out (reconcile to the channel pointer), warm-up, and the watch after each wave."""
