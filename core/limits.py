"""Process limits a broker raises for itself at start.

Open files: each partition a broker holds keeps one descriptor open, its active
segment's ``.log`` (read and written through it; the indexes live in memory and open
their files only to write or fsync them; sealed segments hold none until read, and a
fetch's region keeps its file open until sent), as Kafka keeps one channel per segment
and maps its indexes. Many systems start processes with a soft ``RLIMIT_NOFILE`` of
1,024 under a hard limit of a million or more; a broker that stayed at the soft limit
would take logs offline (EMFILE) past about a thousand partitions, less the
connections. So the soft limit is raised to the hard one, as Kafka's and Redpanda's
service units do with ``LimitNOFILE``; the hard limit is the operator's to raise.
"""

from __future__ import annotations

import resource

FDS_PER_PARTITION = 1  # an idle partition: its active segment's .log (hot.segment)


def raise_open_files() -> tuple[int, int]:
    """Raise the soft open-files limit to the hard one; returns (soft, hard) afterwards
    (unchanged where the platform refuses)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard
