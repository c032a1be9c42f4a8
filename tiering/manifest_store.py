"""The manifest store: partition manifests (``tiering.manifest``) loaded from and
compare-and-swapped into the bucket, their spillover objects, and the topic manifests.

Updates are compare-and-swap only (``ManifestStore.update``): the writer loads the
manifest and its ETag, applies a pure change, and writes with ``If-Match`` (or
``If-None-Match: *`` when creating); on S3 the service arbitrates, on ``file://`` the
store's lock + atomic rename does. A loser reloads and re-applies, so two writers never
lose each other's updates. ``revision`` grows by one per successful write.

Leader epochs (cluster mode): ``leader_epoch`` is the highest leader epoch of any broker
that wrote the manifest (absent: written by a single node). An update made for an
epoch below it is refused with FencedLeaderEpochError before anything is written, and a
successful update raises it to the writer's epoch, so a deposed leader that has not
noticed yet (a zombie) can never overwrite what its successor recorded.

Spillover (bounded manifest size): when a manifest would hold more than
``ManifestStore.max_segments`` entries, its oldest COPIED segments move to an immutable
spillover object (same segment JSON, ``spillover/<base>-<last>-<digest>.json``), written
*before* the main manifest's CAS, and the main manifest keeps a ``SpilloverRef``. Spilled
segments are all COPIED and lie below every COPIED segment of the main manifest. Readers
use ``ManifestStore.find_segment``/``load_all_segments``. Retention of a spilled range:
advance ``log_start_offset`` past it, delete its segment objects, ``drop_spillover`` the
ref (CAS), then delete the spillover object; every step is idempotent after a crash.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from hot.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    ObjectNotFoundError,
    PreconditionFailedError,
    RetriableObjectStoreError,
)
from tiering.keys import (
    TOPICS_PREFIX,
    manifest_key,
    parse_topic_manifest_key,
    spillover_manifest_key,
    topic_manifest_key,
)
from tiering.manifest import (
    CorruptManifestError,
    Mutation,
    PartitionManifest,
    RemoteSegment,
    SpilloverRef,
    parse_spillover,
    sorted_segments,
    spillover_to_json,
    topic_manifest_from_json,
    topic_manifest_to_json,
)
from tiering.store import ObjectStore

DEFAULT_MAX_SEGMENTS: Final = 1000


class ManifestStore:
    """Loads and compare-and-swaps partition manifests, spills old segments, and keeps the
    topic manifests (``topics/<topic>.json``) that restore and Spark discover topics by."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        max_segments: int = DEFAULT_MAX_SEGMENTS,
        rng: random.Random | None = None,
        spill_cache: int = 64,
        last_cache: int = 16384,
    ) -> None:
        if not isinstance(max_segments, int) or isinstance(max_segments, bool) or max_segments < 2:
            raise InvalidRequestError(f"max_segments must be at least 2, got {max_segments!r}")
        self.store = store
        self.max_segments = max_segments
        self._rng = rng or random.Random()
        self._spill_cache: OrderedDict[str, tuple[RemoteSegment, ...]] = OrderedDict()
        self._spill_cache_size = spill_cache
        # The last manifest this store read or wrote per key, with its ETag: ``update``
        # tries its CAS on it first instead of reading the manifest again (one round trip
        # per update instead of two); a stale entry only costs a 412 and the usual reload.
        self._last: OrderedDict[str, tuple[PartitionManifest, str]] = OrderedDict()
        self._last_size = last_cache

    async def load(
        self, topic: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[PartitionManifest | None, str | None]:
        """(manifest, etag), or (None, None) when the partition has no manifest yet."""
        key = manifest_key(topic, topic_id, partition)
        try:
            data, etag = await self.store.get_with_etag(key)
        except ObjectNotFoundError:
            return None, None
        m = PartitionManifest.from_json(data, source=key)
        if (m.topic, m.topic_id, m.partition) != (topic, topic_id, partition):
            raise CorruptManifestError(
                f"{key}: holds {m.topic}-{m.partition} (topic id {m.topic_id.hex}), not "
                f"{topic}-{partition} (topic id {topic_id.hex})"
            )
        known = self._last.get(key)
        if known is None or known[0].revision <= m.revision:
            # (a GET sent before our own write but answered after it is older: not kept)
            self._remember(key, m, etag)
        return m, etag

    def _remember(self, key: str, m: PartitionManifest, etag: str) -> None:
        self._last[key] = (m, etag)
        self._last.move_to_end(key)
        while len(self._last) > self._last_size:
            self._last.popitem(last=False)

    async def update(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        mutate: Mutation,
        *,
        max_attempts: int = 20,
        leader_epoch: int | None = None,
    ) -> PartitionManifest:
        """Apply ``mutate`` by compare-and-swap and return the manifest now stored.

        ``mutate`` gets the current manifest (an empty one, revision 0, if none exists) and
        returns the changed one, or None / an equal manifest for "no change" (then nothing is
        written). It may run several times and must be pure and idempotent: a write whose
        response was lost looks like a lost race, so it can be applied to a manifest that
        already holds its effect (``add_or_update`` and friends are). On
        PreconditionFailedError the manifest is reloaded and ``mutate`` re-applied after a
        jittered backoff; after ``max_attempts`` losses RetriableObjectStoreError. The first
        try is made on the manifest this store last read or wrote, without reading it again
        (a stale one fails the CAS and is reloaded at once).

        ``leader_epoch`` (cluster mode: the writer's epoch as leader of the partition)
        fences stale writers: FencedLeaderEpochError, before ``mutate`` runs, if the stored
        manifest was written in a later epoch; a write raises the stored epoch to it."""
        key = manifest_key(topic, topic_id, partition)
        # First try on the manifest this store last read or wrote (no GET). Only a real
        # change is written that way: whatever else ``mutate`` says of a possibly stale
        # manifest (no change, an error) is asked again of a fresh load, so callers see
        # exactly what a load-then-CAS would have shown them.
        cached = self._last.get(key)
        etag_or_none: str | None
        attempt = 0
        while attempt < max_attempts:
            if cached is not None:
                base, etag_or_none = cached
                cached = None
                if leader_epoch is not None and base.leader_epoch > leader_epoch:
                    continue  # the fresh load raises FencedLeaderEpochError
                try:
                    changed = mutate(base)
                except Exception:
                    changed = None
                if changed is None or replace(changed, revision=base.revision) == base:
                    continue  # decide on a fresh load
                optimistic = True
            else:
                current, etag_or_none = await self.load(topic, topic_id, partition)
                base = current or PartitionManifest.empty(topic, topic_id, partition)
                if leader_epoch is not None and base.leader_epoch > leader_epoch:
                    raise FencedLeaderEpochError(
                        f"{key}: written in leader epoch {base.leader_epoch}, after ours ({leader_epoch})"
                    )
                changed = mutate(base)
                if changed is None or replace(changed, revision=base.revision) == base:
                    return base
                optimistic = False
            etag = etag_or_none
            if leader_epoch is not None:
                changed = replace(changed, leader_epoch=max(base.leader_epoch, leader_epoch))
            if (changed.topic, changed.topic_id, changed.partition) != (topic, topic_id, partition):
                raise InvalidRequestError(f"{key}: a manifest update cannot change the topic or partition")
            new = replace(changed, revision=base.revision + 1)
            new = await self._spill(new)
            try:
                if etag is None:
                    new_etag = await self.store.put(key, new.to_json(), if_none_match=True)
                else:
                    new_etag = await self.store.put(key, new.to_json(), if_match=etag)
            except PreconditionFailedError:
                self._last.pop(key, None)
                if optimistic:
                    continue  # our cached copy was stale: reload at once, not a lost race
                await asyncio.sleep(self._rng.uniform(0, min(0.5, 0.005 * 2**attempt)))
                attempt += 1
                continue
            except BaseException:
                self._last.pop(key, None)  # the write may or may not have happened
                raise
            self._remember(key, new, new_etag)
            return new
        raise RetriableObjectStoreError(
            f"{key}: manifest update lost the compare-and-swap {max_attempts} times in a row"
        )

    async def _spill(self, m: PartitionManifest) -> PartitionManifest:
        if len(m.segments) <= self.max_segments:
            return m
        copied = m.copied()
        n = min(len(copied), len(m.segments) - self.max_segments // 2)
        if n <= 0:
            return m
        spilled = copied[:n]
        data = spillover_to_json(m, spilled)
        key = spillover_manifest_key(
            m.topic,
            m.topic_id,
            m.partition,
            spilled[0].base_offset,
            spilled[-1].last_offset,
            digest=hashlib.sha256(data).hexdigest()[:16],
        )
        # Written before the manifest that names it: a reader never meets a dangling ref.
        # The key names the content, so a racing writer can only rewrite identical bytes.
        await self.store.put(key, data)
        ref = SpilloverRef(
            base_offset=spilled[0].base_offset,
            last_offset=spilled[-1].last_offset,
            key=key,
            segment_count=len(spilled),
            size=sum(s.size for s in spilled),
            max_timestamp=max(s.max_timestamp for s in spilled),
        )
        ids = {s.segment_id for s in spilled}
        self._cache_spill(key, tuple(spilled))
        return replace(
            m,
            segments=tuple(s for s in m.segments if s.segment_id not in ids),
            spillover=(*m.spillover, ref),
        )

    def _cache_spill(self, key: str, segs: tuple[RemoteSegment, ...]) -> None:
        self._spill_cache[key] = segs
        self._spill_cache.move_to_end(key)
        while len(self._spill_cache) > self._spill_cache_size:
            self._spill_cache.popitem(last=False)

    async def load_spillover(self, ref: SpilloverRef) -> tuple[RemoteSegment, ...]:
        """The segments of one spillover manifest (immutable, so cached)."""
        cached = self._spill_cache.get(ref.key)
        if cached is not None:
            self._spill_cache.move_to_end(ref.key)
            return cached
        try:
            data = await self.store.get(ref.key)
        except ObjectNotFoundError:
            raise CorruptManifestError(f"spillover manifest {ref.key} is referenced but missing") from None
        segs = parse_spillover(data, ref)
        self._cache_spill(ref.key, segs)
        return segs

    async def load_all_segments(self, topic: str, topic_id: uuid.UUID, partition: int) -> list[RemoteSegment]:
        """Every segment of the partition, spilled ones included, by base offset."""
        m, _ = await self.load(topic, topic_id, partition)
        if m is None:
            return []
        return await self.all_segments(m)

    async def all_segments(self, m: PartitionManifest) -> list[RemoteSegment]:
        out: list[RemoteSegment] = []
        for ref in m.spillover:
            out.extend(await self.load_spillover(ref))
        out.extend(m.segments)
        return list(sorted_segments(out))

    async def find_segment(self, m: PartitionManifest, offset: int) -> RemoteSegment | None:
        """The COPIED segment containing ``offset``, looking into spillover when needed."""
        seg = m.find(offset)
        if seg is not None:
            return seg
        ref = m.spillover_for(offset)
        if ref is None:
            return None
        for s in await self.load_spillover(ref):
            if s.contains(offset):
                return s
        return None

    # -- topic manifests --

    async def put_topic_manifest(self, topic_json: Mapping[str, Any]) -> None:
        """Write ``topics/<name>.json``: ``{"name", "topic_id", "partitions", "configs"}``
        (``topic_id`` as a UUID string; ``format_version`` is added). Overwrites."""
        name, data = topic_manifest_to_json(topic_json)
        await self.store.put(topic_manifest_key(name), data)

    async def load_topic_manifest(self, topic: str) -> dict[str, Any] | None:
        key = topic_manifest_key(topic)
        try:
            data = await self.store.get(key)
        except ObjectNotFoundError:
            return None
        return topic_manifest_from_json(data, key, topic)

    async def list_topics(self) -> list[str]:
        names = (parse_topic_manifest_key(o.key) for o in await self.store.list(TOPICS_PREFIX))
        return sorted(n for n in names if n is not None)
