"""The guest side of the VM control channel: the agent script the VM disk carries.

It lives with the images because the disk build writes it (vmdisk.py); the host side of
the channel, and the protocol's description, are in platforms/qemu/guest.py.
"""
from __future__ import annotations

PORT_NAME = "org.virtbench.agent"
"""The virtio-serial port the guest's init starts the agent on."""
AGENT_PATH = "/usr/local/sbin/vb-agent"

AGENT_SCRIPT = r"""#!/bin/bash
# virtbench guest agent: runs the commands the host sends over a virtio-serial port.
# Written into the VM disk by virtbench; virtbench/platforms/qemu/guest.py documents the protocol
# and holds the host side. One command at a time; output goes through files, never shell
# variables, so large and binary outputs are fine. Forks are few: each costs ~0.1 s under
# TCG emulation, so decoding uses bash builtins only.
set -u
port=${1:?usage: vb-agent PORT-DEVICE [WORKDIR]}
work=${2:-/run/vb-agent}                 # a tmpfs of its own (guest init), or /run
# The environment of commands sent without one: exactly virtbench's EXEC_ENV.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C
for v in $(compgen -e); do case $v in PATH|HOME|LC_ALL) ;; *) export -n "$v" ;; esac; done
[ -d "$work" ] || mkdir -p "$work"
cd / || exit 1
exec 4<> <(:)                            # read -t on this pipe sleeps without forking
exec 3<>"$port"
reply() { # id status outfile errfile
    { printf 'R %s %s ' "$1" "$2"; [ -s "$3" ] && base64 -w0 "$3"; printf ' ';
      [ -s "$4" ] && base64 -w0 "$4"; printf '
'; } >&3
}
while :; do
    if ! IFS=' ' read -r -a f -u 3; then
        # A virtio port reads end-of-file while no host client is connected: poll.
        read -r -t 0.02 -u 4 _ || true
        continue
    fi
    id=${f[1]:-}
    [[ "$id" =~ ^[0-9a-f]{1,32}$ ]] || continue
    if [ "${f[0]}" != Q ] || (( ${#f[@]} < 6 )) || [[ ! "${f[2]}" =~ ^[0-9]+(\.[0-9]+)?$ ]]         || [[ ! "${f[4]}" =~ ^(-|[0-9]+)$ ]]; then
        printf 'vb-agent: malformed request
' >"$work/err"
        reply "$id" 255 /dev/null "$work/err"
        continue
    fi
    tmo=${f[2]} nenv=${f[4]}
    [ "$nenv" = - ] && first=5 || first=$((5 + nenv))
    envs=() args=()
    for ((i = 5; i < ${#f[@]}; i++)); do
        printf -v a '%b' "${f[i]:1}"
        if ((i < first)); then envs+=("$a"); else args+=("$a"); fi
    done
    if ((${#args[@]} == 0)); then
        printf 'vb-agent: no command
' >"$work/err"
        reply "$id" 255 /dev/null "$work/err"
        continue
    fi
    case ${f[3]} in
        -) in=/dev/null ;;
        =) : >"$work/in"; in=$work/in ;;
        *) base64 -d <<<"${f[3]}" >"$work/in"; in=$work/in ;;
    esac
    (
        unset -v SHLVL PWD OLDPWD
        if [ "$nenv" != - ]; then unset -v PATH HOME LC_ALL; export -- "${envs[@]}"; fi
        if [ "$tmo" = 0 ]; then exec "${args[@]}"; fi
        exec /usr/bin/timeout -k 5 "$tmo" "${args[@]}"
    ) <"$in" >"$work/out" 2>"$work/err"
    reply "$id" "$?" "$work/out" "$work/err"
    : >"$work/out"; : >"$work/err"; [ "$in" = /dev/null ] || rm -f "$in"
done
"""
