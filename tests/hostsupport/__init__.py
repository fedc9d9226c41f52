"""Second hosts made for real on this one machine (a network namespace with sshd, a QEMU guest)."""
