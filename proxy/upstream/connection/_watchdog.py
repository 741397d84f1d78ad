"""Run a stdio upstream so that it never outlives toolbridge, however toolbridge ends (SIGKILL included).

Run by path with the standard library only: `python -I -S _watchdog.py FD COMMAND [ARGS...]`. FD is
the read end of a pipe whose write end only toolbridge holds, so it ends when toolbridge closes it
or dies. A forked watchdog, in the server's process group and holding none of its pipes, waits for
that end and then kills the whole group, grandchildren (`npx` → node, `uvx` → python) included; the
server is exec'd in place, so its pid is still the group's leader. (A pipe, not `PR_SET_PDEATHSIG`:
that fires when the forking *thread* exits, reaches no grandchild, and exists on Linux only.)
"""

import os
import signal
import sys


def main() -> None:
    fd, command = int(sys.argv[1]), sys.argv[2:]
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):  # the server's end of file must not wait for us
            os.dup2(null, target)
        while os.read(fd, 1):
            pass
        os.killpg(0, signal.SIGKILL)
    os.close(fd)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
