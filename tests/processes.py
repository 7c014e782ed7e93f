"""What /proc says of a test's processes: whether one still runs, its children, a session's members.
One reading of /proc/PID/stat for every test that checks no process is left behind."""

from __future__ import annotations

from pathlib import Path


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running, not a zombie (an orphan that has exited waits for its new parent to reap it)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(p) for p in path.read_text().split()]
    except OSError:
        return []


def session_members(session: int) -> list[int]:
    """The processes still running in a session (field 6 of /proc/PID/stat: its session id)."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[3]) == session:
            members.append(int(entry.name))
    return members
