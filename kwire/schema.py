"""Declarative Kafka message schemas, compiled once into per-version codecs. Pure, no I/O.

A message or nested struct is a frozen, slotted, keyword-only dataclass whose fields carry
their wire description in ``Annotated`` metadata; field order is wire order::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class ProducePartitionData:
        index: Annotated[int, W(INT32)]
        records: Annotated[bytes | memoryview | None, W(RECORDS, nullable="0+")] = None

    @dataclass(frozen=True, slots=True, kw_only=True)
    class ProduceRequest:
        transactional_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None
        acks: Annotated[int, W(INT16)]
        ...

``W(kind, versions, nullable=..., tag=..., tagged=..., ignorable=...)`` follows Kafka's JSON
message definitions: ``versions``/``nullable``/``tagged`` are version ranges ("0+", "3-5",
"7", "none"); a field outside ``versions`` is neither read nor written and takes its
dataclass default (so such fields must have one). Encoding a non-default value in a version
without the field drops it silently when the field is ignorable and is an ``EncodeError``
when it is not, as Kafka's generated writers raise UnsupportedVersionException: a request
that means something the peer cannot be told must not go out as something else. Kafka's
JSON defaults ``ignorable`` to false; ``W`` defaults it to True because the tables written
before the rule existed rely on the silent drop, so newer tables say ``ignorable=False``
wherever Kafka's JSON leaves it unset (the defaults must then be Kafka's: 0, "", false,
empty, null).

Kinds are the primitives below, ``ARRAY(elem)`` where elem is a primitive kind or a struct
class, and ``STRUCT(cls)`` (a nullable struct is preceded by an INT8 marker, -1 for null, as
in Kafka). The message's flexible versions (KIP-482) switch strings, bytes
and arrays to their compact encodings and add a tagged-field section after every struct.
Tagged fields are written only when they differ from their default, as Kafka does (a
struct-valued tagged field is None when absent and is not written when None or equal to its
all-defaults instance). On decode unknown tags are skipped; a duplicate tag, or a known tag
whose declared size its value does not exactly fill, is malformed (Kafka does not check
these; nothing legitimate produces them).

``MessageSchema(cls, versions="3-9", flexible="9+")`` compiles a ``StructCodec`` per
version up front (field plans with version ranges resolved, runs of fixed-width fields
merged into one ``struct.Struct``), so decoding and encoding never re-evaluate ranges.

The ``RECORDS`` kind is how record batches stay zero-copy: decoding yields a ``memoryview``
slice of the frame (None for null); encoding accepts bytes-likes, any object with an integer
``length`` attribute (a file region the server sends with sendfile), or a sequence of
those, writes the total length prefix and passes the region objects through
``Writer.region`` in order.
"""

from __future__ import annotations

import dataclasses
import operator
import struct
import typing
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final, Protocol

from kwire.errors import EncodeError, ProtocolError, SchemaError
from kwire.primitives import MAX_INT32, Buffer, Reader, Writer

MAX_VERSION: Final = 0x7FFF

ReadFn = Callable[[Reader], Any]
WriteFn = Callable[[Writer, Any], None]


class FileRegion(Protocol):
    """Anything the server can send itself (e.g. with sendfile); only its size matters here."""

    @property
    def length(self) -> int: ...


RecordsPart = Buffer | FileRegion
RecordsData = Buffer | FileRegion | Sequence[RecordsPart]


# --- version ranges ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionRange:
    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @staticmethod
    def parse(spec: str) -> VersionRange | None:
        """Parse "3+", "0-4", "7" or "none" (-> None), as in Kafka's JSON definitions."""
        s = spec.strip()
        try:
            if s == "none":
                return None
            if s.endswith("+"):
                return VersionRange(int(s[:-1]), MAX_VERSION)
            if "-" in s:
                lo, hi = s.split("-", 1)
                return VersionRange(int(lo), int(hi))
            return VersionRange(int(s), int(s))
        except ValueError:
            raise SchemaError(f"bad version range {spec!r}") from None


def _in(rng: VersionRange | None, version: int) -> bool:
    return rng is not None and rng.lo <= version <= rng.hi


# --- kinds -------------------------------------------------------------------------------


class Kind:
    """A wire type. Primitive kinds are module constants; ARRAY/STRUCT build composite ones."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Prim(Kind):
    __slots__ = ("fmt", "method", "nullable_ok")

    def __init__(self, name: str, method: str, fmt: str | None = None, *, nullable_ok: bool = False) -> None:
        super().__init__(name)
        self.fmt = fmt  # struct format char for fixed-width kinds (mergeable into runs)
        self.method = method  # Reader/Writer method name for the non-nullable, non-compact form
        self.nullable_ok = nullable_ok


INT8: Final = Prim("int8", "int8", "b")
INT16: Final = Prim("int16", "int16", "h")
UINT16: Final = Prim("uint16", "uint16", "H")
INT32: Final = Prim("int32", "int32", "i")
UINT32: Final = Prim("uint32", "uint32", "I")
INT64: Final = Prim("int64", "int64", "q")
FLOAT64: Final = Prim("float64", "float64", "d")
BOOL: Final = Prim("bool", "boolean", "?")
UUID: Final = Prim("uuid", "uuid")
STRING: Final = Prim("string", "string", nullable_ok=True)
BYTES: Final = Prim("bytes", "bytes", nullable_ok=True)
RECORDS: Final = Prim("records", "bytes", nullable_ok=True)

_FIXED_SIZE: Final = {"b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "?": 1}


class Array(Kind):
    __slots__ = ("elem",)

    def __init__(self, elem: Kind) -> None:
        super().__init__(f"[]{elem.name}")
        self.elem = elem


class Struct(Kind):
    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        super().__init__(cls.__name__)
        self.cls = cls


def STRUCT(cls: type) -> Struct:
    if not dataclasses.is_dataclass(cls):
        raise SchemaError(f"{cls!r} is not a dataclass")
    return Struct(cls)


def ARRAY(elem: Kind | type) -> Array:
    if isinstance(elem, Kind):
        if elem is RECORDS:
            raise SchemaError("arrays of records are not a Kafka type")
        return Array(elem)
    return Array(STRUCT(elem))


@dataclass(frozen=True, slots=True)
class W:
    """Wire description of one field (goes in ``Annotated[...]`` metadata)."""

    kind: Kind | type
    versions: str = "0+"
    _: KW_ONLY
    nullable: str = "none"
    tag: int | None = None
    tagged: str | None = None  # defaults to ``versions`` when ``tag`` is set
    ignorable: bool = True  # False: a non-default value outside ``versions`` cannot be encoded


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """A resolved field: its name, kind, version ranges and dataclass default."""

    name: str
    kind: Kind
    versions: VersionRange
    nullable: VersionRange | None
    tag: int | None
    tagged: VersionRange | None
    has_default: bool
    default: Any
    ignorable: bool = True

    def present_in(self, version: int) -> bool:
        return _in(self.versions, version)

    def nullable_in(self, version: int) -> bool:
        return _in(self.nullable, version)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and _in(self.tagged, version)


_FIELDS: dict[type, tuple[FieldInfo, ...]] = {}


def wire_fields(cls: type) -> tuple[FieldInfo, ...]:
    """The wire fields of a schema dataclass, in wire order."""
    got = _FIELDS.get(cls)
    if got is not None:
        return got
    if not dataclasses.is_dataclass(cls):
        raise SchemaError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls, include_extras=True)
    out: list[FieldInfo] = []
    for f in dataclasses.fields(cls):
        specs = [m for m in getattr(hints[f.name], "__metadata__", ()) if isinstance(m, W)]
        if len(specs) != 1:
            raise SchemaError(f"{cls.__name__}.{f.name}: needs exactly one W(...) in Annotated[...]")
        spec = specs[0]
        kind = spec.kind if isinstance(spec.kind, Kind) else STRUCT(spec.kind)
        versions = VersionRange.parse(spec.versions)
        if versions is None:
            raise SchemaError(f"{cls.__name__}.{f.name}: versions cannot be 'none'")
        if f.default is not dataclasses.MISSING:
            has_default, default = True, f.default
        elif f.default_factory is not dataclasses.MISSING:
            has_default, default = True, f.default_factory()
        else:
            has_default, default = False, None
        tagged = None
        if spec.tag is not None:
            tagged = VersionRange.parse(spec.tagged if spec.tagged is not None else spec.versions)
            if not has_default:
                raise SchemaError(f"{cls.__name__}.{f.name}: tagged fields need a default")
        out.append(
            FieldInfo(
                name=f.name,
                kind=kind,
                versions=versions,
                nullable=VersionRange.parse(spec.nullable),
                tag=spec.tag,
                tagged=tagged,
                has_default=has_default,
                default=default,
                ignorable=spec.ignorable,
            )
        )
    result = tuple(out)
    _FIELDS[cls] = result
    return result


# --- compiled codecs ---------------------------------------------------------------------

_ENCODE_FAILURES: Final = (struct.error, TypeError, ValueError, OverflowError, AttributeError)


def _encode_error(exc: BaseException) -> EncodeError:
    return exc if isinstance(exc, EncodeError) else EncodeError(f"{type(exc).__name__}: {exc}")


class StructCodec:
    """Decoder and encoder of one struct class at one version."""

    __slots__ = ("cls", "decode", "encode", "flexible", "min_size", "version")

    def __init__(self, cls: type, version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.min_size = 0
        self.decode: ReadFn = _unbuilt_read
        self.encode: WriteFn = _unbuilt_write


def _unbuilt_read(r: Reader) -> Any:
    raise SchemaError("codec used before it was built (recursive schema?)")


def _unbuilt_write(w: Writer, v: Any) -> None:
    raise SchemaError("codec used before it was built (recursive schema?)")


_CODECS: dict[tuple[type, int, bool], StructCodec] = {}


def struct_codec(cls: type, version: int, flexible: bool) -> StructCodec:
    """The (cached) codec of ``cls`` at ``version``; flexibility is the enclosing message's."""
    key = (cls, version, flexible)
    codec = _CODECS.get(key)
    if codec is None:
        codec = StructCodec(cls, version, flexible)
        _CODECS[key] = codec
        _build(codec)
    return codec


def _build(codec: StructCodec) -> None:
    cls, version, flexible = codec.cls, codec.version, codec.flexible
    name = cls.__name__
    fields = wire_fields(cls)
    plain: list[FieldInfo] = []
    tagged: list[FieldInfo] = []
    absent_checked: list[FieldInfo] = []
    for fi in fields:
        if not fi.present_in(version):
            if not fi.has_default:
                raise SchemaError(f"{name}.{fi.name}: absent in v{version} but has no default")
            if not fi.ignorable:
                absent_checked.append(fi)
            continue
        if fi.tagged_in(version):
            if not flexible:
                raise SchemaError(f"{name}.{fi.name}: tagged in non-flexible v{version}")
            tagged.append(fi)
        else:
            if fi.nullable_in(version) and isinstance(fi.kind, Prim) and not fi.kind.nullable_ok:
                raise SchemaError(f"{name}.{fi.name}: {fi.kind.name} cannot be nullable")
            plain.append(fi)
    tagged.sort(key=lambda fi: fi.tag or 0)
    if len({fi.tag for fi in tagged}) != len(tagged):
        raise SchemaError(f"{name}: duplicate tags in v{version}")

    items: list[_Item] = []
    min_size = 1 if flexible else 0
    run: list[FieldInfo] = []

    def flush_run() -> None:
        nonlocal min_size
        if not run:
            return
        if len(run) == 1:
            single(run[0])
        else:
            fmts = "".join(typing.cast(Prim, fi.kind).fmt or "" for fi in run)
            items.append(_Run(tuple(fi.name for fi in run), fmts))
            min_size += struct.calcsize(">" + fmts)
        run.clear()

    def single(fi: FieldInfo) -> None:
        nonlocal min_size
        nullable = fi.nullable_in(version)
        read, size = _reader(fi.kind, nullable, flexible, version)
        write = _writer(fi.kind, nullable, flexible, version)
        array = None
        if isinstance(fi.kind, Array):
            elem_read, elem_min = _reader(fi.kind.elem, False, flexible, version)
            count = Reader.compact_array_count if flexible else Reader.array_count
            array = (count, elem_read, elem_min, nullable)
        items.append(_Single(fi.name, read, write, array))
        min_size += size

    for fi in plain:
        if isinstance(fi.kind, Prim) and fi.kind.fmt is not None:
            run.append(fi)
        else:
            flush_run()
            single(fi)
    flush_run()

    tag_readers: dict[int, tuple[str, ReadFn]] = {}
    tag_writers: list[tuple[int, str, WriteFn, Any, bool]] = []
    for fi in tagged:
        assert fi.tag is not None
        read, _ = _reader(fi.kind, fi.nullable_in(version), flexible, version)
        write = _writer(fi.kind, fi.nullable_in(version), flexible, version)
        tag_readers[fi.tag] = (fi.name, read)
        # Kafka writes a tagged field only when it differs from its default; for a struct
        # that is "not None and not the all-defaults struct".
        default = _default_instance(fi.kind.cls) if isinstance(fi.kind, Struct) else fi.default
        tag_writers.append((fi.tag, fi.name, write, default, isinstance(fi.kind, Struct)))

    codec.min_size = min_size
    checks = [_absent_check(fi.name, fi.default, version) for fi in absent_checked]
    codec.decode = _gen_decoder(cls, items, flexible, tag_readers)
    codec.encode = _gen_encoder(
        cls, checks, [fi.name for fi in absent_checked], items, flexible, tuple(tag_writers)
    )


# --- generated struct codecs ---------------------------------------------------------------
#
# Each struct version's decode and encode is one generated function (as dataclasses builds
# __init__): fields read into locals in wire order and the class called once, runs of
# fixed-width fields one struct call, array loops inline. Against a loop over per-field
# closures it halves the Python calls of a small request (a one-record Produce decodes in
# ~4 µs instead of ~9), with the same errors: the failing field's path, the index of a bad
# array element, the precise field of a fixed-width run.


@dataclass(frozen=True, slots=True)
class _Single:
    name: str
    read: ReadFn
    write: WriteFn
    array: tuple[Callable[..., int | None], ReadFn, int, bool] | None  # count, element, min size, nullable


@dataclass(frozen=True, slots=True)
class _Run:
    names: tuple[str, ...]
    fmts: str


_Item = _Single | _Run


def _compile(src: str, env: dict[str, Any], name: str) -> Any:
    code = compile(src, f"<strata codec {name}>", "exec")
    exec(code, env)  # source generated above from the schema, never from input
    return env[name]


def _gen_decoder(
    cls: type, items: list[_Item], flexible: bool, tag_readers: dict[int, tuple[str, ReadFn]]
) -> ReadFn:
    env: dict[str, Any] = {"ProtocolError": ProtocolError, "CLS": cls, "TAGS": tag_readers}
    env["read_tagged"] = _read_tagged
    labels: list[str] = []
    lines = ["def decode(r):", "    _i = 0", "    try:"]
    names: list[str] = []
    for i, item in enumerate(items):
        if i:
            lines.append(f"        _i = {i}")
        if isinstance(item, _Run):
            st = struct.Struct(">" + item.fmts)
            env[f"unpack_{i}"] = st.unpack_from
            env[f"short_{i}"] = _run_short(item.names, item.fmts)
            local = ", ".join(f"v_{n}" for n in item.names)
            lines += [
                "        _p = r.pos",
                f"        if _p + {st.size} > r.end:",
                f"            raise short_{i}(r, _p)",
                f"        r.pos = _p + {st.size}",
                f"        {local}, = unpack_{i}(r.buf, _p)",
            ]
            names.extend(item.names)
            labels.append("")
            continue
        n = item.name
        names.append(n)
        labels.append("." + n)
        if item.array is None:
            env[f"read_{i}"] = item.read
            lines.append(f"        v_{n} = read_{i}(r)")
            continue
        count, elem_read, elem_min, nullable = item.array
        env[f"count_{i}"] = count
        env[f"elem_{i}"] = elem_read
        lines += [
            f"        _n = count_{i}(r, {nullable}, {elem_min})",
            "        if _n is None:",
            f"            v_{n} = None",
            "        else:",
            "            _out = []",
            "            _add = _out.append",
            "            try:",
            "                for _ in range(_n):",
            f"                    _add(elem_{i}(r))",
            "            except ProtocolError as e:",
            '                e.add_path(f"[{len(_out)}]")',
            "                raise",
            f"            v_{n} = tuple(_out)",
        ]
    env["LABELS"] = tuple(labels)
    call = ", ".join(f"{n}=v_{n}" for n in names)
    if not items:
        lines.append("        pass")
    lines += ["    except ProtocolError as e:", "        e.add_path(LABELS[_i])", "        raise"]
    if flexible:
        kw = ", ".join(f"{n!r}: v_{n}" for n in names)
        lines += [
            "    _p = r.pos",
            "    if _p < r.end and r.buf[_p] == 0:  # no tagged fields: the usual case",
            "        r.pos = _p + 1",
            f"        return CLS({call})",
            f"    kw = {{{kw}}}",
            "    read_tagged(r, kw, TAGS)",
            "    return CLS(**kw)",
        ]
    else:
        lines.append(f"    return CLS({call})")
    if not labels:
        env["LABELS"] = ("",)
    return typing.cast(ReadFn, _compile("\n".join(lines), env, "decode"))


def _read_tagged(r: Reader, kw: dict[str, Any], tag_readers: dict[int, tuple[str, ReadFn]]) -> None:
    tags = r.tagged_fields()
    for tag, raw in tags.items():
        known = tag_readers.get(tag)
        if known is None:
            continue  # unknown tags are skipped (forward compatibility)
        fname, read = known
        sub = Reader(r.buf, raw[0], raw[1])
        try:
            kw[fname] = read(sub)
            if sub.pos != sub.end:
                raise ProtocolError(
                    f"tagged field {tag} has {sub.end - sub.pos} unread bytes at offset {sub.pos}"
                )
        except ProtocolError as e:
            e.add_path("." + fname)
            raise


def _absent_check(name: str, default: Any, version: int) -> Callable[[Writer, Any], None]:
    get = operator.attrgetter(name)

    def check(w: Writer, obj: Any) -> None:
        v = get(obj)
        if not _is_default(v, default):
            raise EncodeError(f"{v!r} cannot be sent in v{version}, which lacks this non-ignorable field")

    return check


def _run_short(names: tuple[str, ...], fmts: str) -> Callable[[Reader, int], ProtocolError]:
    """The error of a fixed-width run that overruns the frame: names the field that does."""

    def short(r: Reader, pos: int) -> ProtocolError:
        off = pos
        for key, fmt in zip(names, fmts, strict=True):
            n = _FIXED_SIZE[fmt]
            if off + n > r.end:
                r.pos = off
                err = r.short(n, _FMT_NAME[fmt])
                err.add_path("." + key)
                return err
            off += n
        raise AssertionError("run does not overrun")  # pragma: no cover

    return short


def _run_diagnosis(names: tuple[str, ...], fmts: str) -> Callable[[tuple[Any, ...]], None]:
    """Raises the precise error of a fixed-width run that failed to pack (which field, why)."""

    def diagnose(values: tuple[Any, ...]) -> None:
        for key, fmt, v in zip(names, fmts, values, strict=True):
            try:
                struct.pack(">" + fmt, v)
            except _ENCODE_FAILURES as e:
                err = EncodeError(f"{_FMT_NAME[fmt]} field: {e}")
                err.add_path("." + key)
                raise err from None

    return diagnose


def _gen_encoder(
    cls: type,
    checks: list[Callable[[Writer, Any], None]],
    check_names: list[str],
    items: list[_Item],
    flexible: bool,
    tag_writers: tuple[tuple[int, str, WriteFn, Any, bool], ...],
) -> WriteFn:
    env: dict[str, Any] = {
        "CLS": cls,
        "EncodeError": EncodeError,
        "FAILURES": (*_ENCODE_FAILURES, EncodeError),
        "PACK_FAILURES": _ENCODE_FAILURES,
        "encode_error": _encode_error,
        "TAG_WRITERS": tag_writers,
        "write_tagged": _write_tagged,
    }
    labels: list[str] = []
    lines = [
        "def encode(w, obj):",
        "    if type(obj) is not CLS and not isinstance(obj, CLS):",
        f'        raise EncodeError(f"expected {cls.__name__}, got {{type(obj).__name__}}")',
        "    _i = 0",
        "    try:",
    ]
    step = 0
    # Checked before this struct writes any field (Kafka's writers check in field order; the
    # outcome, a refused message, is the same).
    for check, name in zip(checks, check_names, strict=True):
        env[f"check_{step}"] = check
        lines += [f"        _i = {step}", f"        check_{step}(w, obj)"]
        labels.append("." + name)
        step += 1
    for item in items:
        lines.append(f"        _i = {step}")
        if isinstance(item, _Run):
            env[f"pack_{step}"] = struct.Struct(">" + item.fmts).pack
            env[f"diagnose_{step}"] = _run_diagnosis(item.names, item.fmts)
            values = ", ".join(f"obj.{n}" for n in item.names)
            lines += [
                f"        _v = ({values},)",
                "        try:",
                f"            w.buf += pack_{step}(*_v)",
                "        except PACK_FAILURES:",
                f"            diagnose_{step}(_v)",
                "            raise",
            ]
            labels.append("")
        else:
            env[f"write_{step}"] = item.write
            lines.append(f"        write_{step}(w, obj.{item.name})")
            labels.append("." + item.name)
        step += 1
    if not step:
        lines.append("        pass")
    env["LABELS"] = tuple(labels) or ("",)
    lines += [
        "    except FAILURES as e:",
        "        err = encode_error(e)",
        "        err.add_path(LABELS[_i])",
        "        raise err from (None if err is e else e)",
    ]
    if flexible:
        if tag_writers:
            lines.append("    write_tagged(w, obj, TAG_WRITERS)")
        else:
            lines.append("    w.buf.append(0)")
    return typing.cast(WriteFn, _compile("\n".join(lines), env, "encode"))


def _write_tagged(w: Writer, obj: Any, tag_writers: tuple[tuple[int, str, WriteFn, Any, bool], ...]) -> None:
    present: list[tuple[int, bytes]] = []
    for tag, fname, write, default, is_struct in tag_writers:
        v = getattr(obj, fname)
        if _is_default(v, default) or (is_struct and v is None):
            continue
        sub = Writer()
        try:
            write(sub, v)
            present.append((tag, sub.getvalue()))
        except (*_ENCODE_FAILURES, EncodeError) as e:
            err = _encode_error(e)
            err.add_path("." + fname)
            raise err from (None if err is e else e)
    if present:
        w.tagged_fields(present)
    else:
        w.buf.append(0)


_FMT_NAME: Final = {"b": "int8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32", "q": "int64",
                    "d": "float64", "?": "bool"}  # fmt: skip


def _default_instance(cls: type) -> Any:
    """``cls()`` if every field has a default, else None (then any instance differs)."""
    if all(fi.has_default for fi in wire_fields(cls)):
        return cls()
    return None


def _is_default(v: Any, default: Any) -> bool:
    if v is default:
        return True
    if isinstance(default, tuple) and isinstance(v, list):
        return len(v) == 0 and len(default) == 0
    result: bool = v == default
    return result


# --- per-kind readers and writers ------------------------------------------------------------


def _reader(kind: Kind, nullable: bool, flexible: bool, version: int) -> tuple[ReadFn, int]:
    """(read function, minimum encoded size)."""
    if isinstance(kind, Prim):
        return _prim_reader(kind, nullable, flexible)
    if isinstance(kind, Struct):
        codec = struct_codec(kind.cls, version, flexible)
        if nullable:
            return _nullable_struct_reader(_late_decode(codec)), 1
        return _late_decode(codec), codec.min_size
    if isinstance(kind, Array):
        elem_read, elem_min = _reader(kind.elem, False, flexible, version)
        return _array_reader(elem_read, elem_min, nullable, flexible), 1 if flexible else 4
    raise SchemaError(f"unknown kind {kind!r}")


def _nullable_struct_reader(read: ReadFn) -> ReadFn:
    # Kafka's nullable struct: an INT8 marker, negative for null, then the struct.
    def nullable_read(r: Reader) -> Any:
        return None if r.int8() < 0 else read(r)

    return nullable_read


def _nullable_struct_writer(write: WriteFn) -> WriteFn:
    def nullable_write(w: Writer, v: Any) -> None:
        if v is None:
            w.int8(-1)
        else:
            w.int8(1)
            write(w, v)

    return nullable_write


def _late_decode(codec: StructCodec) -> ReadFn:
    # Bind directly once built; only a codec still being built (a recursive schema) needs
    # the indirection.
    return codec.decode if codec.decode is not _unbuilt_read else (lambda r: codec.decode(r))


def _late_encode(codec: StructCodec) -> WriteFn:
    return codec.encode if codec.encode is not _unbuilt_write else (lambda w, v: codec.encode(w, v))


def _prim_reader(kind: Prim, nullable: bool, flexible: bool) -> tuple[ReadFn, int]:
    if kind is STRING:
        if flexible:
            return (Reader.compact_nullable_string if nullable else Reader.compact_string), 1
        return (Reader.nullable_string if nullable else Reader.string), 2
    if kind is BYTES or kind is RECORDS:
        if flexible:
            base: ReadFn = Reader.compact_nullable_bytes if nullable else Reader.compact_bytes
        else:
            base = Reader.nullable_bytes if nullable else Reader.bytes
        size = 1 if flexible else 4
        if kind is RECORDS:
            return base, size  # zero-copy slice of the frame

        def read_bytes(r: Reader) -> bytes | None:
            v = base(r)
            return None if v is None else bytes(v)  # small values; do not pin the frame

        return read_bytes, size
    if kind is UUID:
        return Reader.uuid, 16
    fmt = kind.fmt
    assert fmt is not None
    read: ReadFn = getattr(Reader, kind.method)
    return read, _FIXED_SIZE[fmt]


def _array_reader(elem_read: ReadFn, elem_min: int, nullable: bool, flexible: bool) -> ReadFn:
    count = Reader.compact_array_count if flexible else Reader.array_count

    def read(r: Reader) -> tuple[Any, ...] | None:
        n = count(r, nullable, elem_min)
        if n is None:
            return None
        out = []
        i = 0
        try:
            for i in range(n):  # noqa: B007 - i is reported on error
                out.append(elem_read(r))
        except ProtocolError as e:
            e.add_path(f"[{i}]")
            raise
        return tuple(out)

    return read


def _writer(kind: Kind, nullable: bool, flexible: bool, version: int) -> WriteFn:
    if isinstance(kind, Struct):
        write_struct = _late_encode(struct_codec(kind.cls, version, flexible))
        return _nullable_struct_writer(write_struct) if nullable else write_struct
    if isinstance(kind, Array):
        return _array_writer(_writer(kind.elem, False, flexible, version), nullable, flexible)
    if isinstance(kind, Prim):
        if kind is RECORDS:
            return _records_writer(nullable, flexible)
        if kind is STRING:
            if flexible:
                return Writer.compact_nullable_string if nullable else _not_null(Writer.compact_string)
            return Writer.nullable_string if nullable else _not_null(Writer.string)
        if kind is BYTES:
            if flexible:
                return Writer.compact_nullable_bytes if nullable else _not_null(Writer.compact_bytes)
            return Writer.nullable_bytes if nullable else _not_null(Writer.bytes)
        write: WriteFn = getattr(Writer, kind.method)
        return write
    raise SchemaError(f"unknown kind {kind!r}")


def _not_null(write: WriteFn) -> WriteFn:
    def checked(w: Writer, v: Any) -> None:
        if v is None:
            raise EncodeError("null is not allowed here in this version")
        write(w, v)

    return checked


def _array_writer(elem_write: WriteFn, nullable: bool, flexible: bool) -> WriteFn:
    def write(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null array is not allowed here in this version")
            if flexible:
                w.buf.append(0)
            else:
                w.buf += b"\xff\xff\xff\xff"
            return
        if type(v) is not tuple and (
            isinstance(v, str | bytes | bytearray | memoryview) or not isinstance(v, Sequence)
        ):
            raise EncodeError(f"expected a sequence, got {type(v).__name__}")
        if flexible:
            w.compact_array_count(len(v))
        else:
            w.array_count(len(v))
        for i, x in enumerate(v):
            try:
                elem_write(w, x)
            except (*_ENCODE_FAILURES, EncodeError) as e:
                err = _encode_error(e)
                err.add_path(f"[{i}]")
                raise err from (None if err is e else e)

    return write


# Bytes parts of a records sequence at least this large are passed through, not copied.
PASS_THROUGH_BYTES: Final = 64 << 10


def records_length(part: object) -> int:
    """Size in bytes of one records part: a bytes-like, or an object with an int ``length``."""
    if isinstance(part, bytes | bytearray):
        return len(part)
    if isinstance(part, memoryview):
        return part.nbytes
    n = getattr(part, "length", None)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise EncodeError(f"records part {type(part).__name__} is neither bytes nor has an int length >= 0")
    return n


def _records_writer(nullable: bool, flexible: bool) -> WriteFn:
    def write(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null records are not allowed here in this version")
            if flexible:
                w.buf.append(0)
            else:
                w.buf += b"\xff\xff\xff\xff"
            return
        if isinstance(v, bytes | bytearray | memoryview):
            if flexible:
                w.compact_bytes(v)
            else:
                w.bytes(v)
            return
        parts: Sequence[Any] = v if isinstance(v, Sequence) else (v,)
        total = 0
        for part in parts:
            total += records_length(part)
        if total > MAX_INT32:
            raise EncodeError(f"records of {total} bytes exceed the int32 length limit")
        if flexible:
            w.uvarint(total + 1)
        else:
            w.int32(total)
        for part in parts:
            # Large bytes parts (remote reads) become frame parts of their own, as file
            # regions do: copying megabytes into the encoder's buffer is what costs. (A
            # single bytes value is copied: requests must stay one bytes object.)
            if isinstance(part, bytes | bytearray | memoryview) and records_length(part) < PASS_THROUGH_BYTES:
                w.buf += part
            else:
                w.region(part)

    return write


# --- messages ----------------------------------------------------------------------------


class _Codecs(dict[int, StructCodec]):
    """A schema's codecs by version, each compiled the first time it is asked for; a
    version outside the schema's range is a KeyError, as in a plain dict."""

    __slots__ = ("_schema",)

    def __init__(self, schema: MessageSchema) -> None:
        super().__init__()
        self._schema = schema

    def __missing__(self, version: int) -> StructCodec:
        s = self._schema
        if not (isinstance(version, int) and s.min_version <= version <= s.max_version):
            raise KeyError(version)
        codec = self[version] = struct_codec(s.cls, version, _in(s.flexible, version))
        return codec

    def __contains__(self, version: object) -> bool:
        s = self._schema
        return isinstance(version, int) and s.min_version <= version <= s.max_version

    def get(self, version: int, default: Any = None) -> Any:  # type: ignore[override]
        if version in self:  # not dict.get: that would not call __missing__
            return self[version]
        return default


class MessageSchema:
    """A top-level request or response: its class, valid versions and flexible versions."""

    __slots__ = ("cls", "codecs", "flexible", "max_version", "min_version")

    def __init__(self, cls: type, versions: str, flexible: str) -> None:
        valid = VersionRange.parse(versions)
        if valid is None:
            raise SchemaError(f"{cls.__name__}: no valid versions")
        self.cls = cls
        self.min_version = valid.lo
        self.max_version = valid.hi
        self.flexible = VersionRange.parse(flexible)
        # Compiled on first use: compiling every version of every API up front is most of
        # the import time of kwire, which every CLI command pays (issue 32).
        self.codecs: dict[int, StructCodec] = _Codecs(self)

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    def codec(self, version: int) -> StructCodec:
        codec = self.codecs.get(version)
        if codec is None:
            raise SchemaError(
                f"{self.cls.__name__} has no version {version} ({self.min_version}-{self.max_version})"
            )
        return codec


def decode(schema: MessageSchema, version: int, reader: Reader) -> Any:
    """Decode one ``schema`` message at ``version`` from ``reader``; raises ProtocolError."""
    return schema.codec(version).decode(reader)


def encode(schema: MessageSchema, version: int, obj: Any, writer: Writer) -> None:
    """Encode ``obj`` as ``schema`` at ``version`` into ``writer``; raises EncodeError."""
    schema.codec(version).encode(writer, obj)
