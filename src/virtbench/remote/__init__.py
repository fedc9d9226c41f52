"""Several hosts: the inventory (HostSpec), the SSH transport, preflight and shipping, and the
remote side of a multi-host run."""
