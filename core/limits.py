"""Process limits a broker raises for itself at start.

Open files: each partition a broker holds keeps four descriptors open (its active
segment's ``.log`` for writing and for reading, ``.index``, ``.timeindex``; Kafka keeps one
and maps its indexes), and every sealed segment three more. Many systems start processes
with a soft ``RLIMIT_NOFILE`` of 1,024 under a hard limit of a million or more; a broker
that stayed at the soft limit would take logs offline (EMFILE) past about 250
partitions. So the soft limit is raised to the hard one, as Kafka's and Redpanda's
service units do with ``LimitNOFILE``; the hard limit is the operator's to raise.
"""

from __future__ import annotations

import resource

FDS_PER_PARTITION = 4  # an idle partition with one (active) segment


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
