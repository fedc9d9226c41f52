"""QEMU/KVM virtual machines: the platform (platform.py), its options, the QEMU argv, the
accelerator check, host-side plumbing (processes, taps, cgroups), the guest control channel
and what a VM needs to host other platforms (stack.py).

Kept empty on purpose: the guest channel client runs as `python -m
virtbench.platforms.qemu.guest` for every command sent into a VM, and must not import the
whole platform first.
"""
