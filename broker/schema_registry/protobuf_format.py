"""Protobuf: a schema is ``.proto`` text or, as confluent-kafka's ProtobufSerializer
registers it, a base64 ``FileDescriptorProto``. Text is compiled by ``protoc`` (the
``grpcio-tools`` package's, run as a subprocess with the references handed in as a
descriptor set), so the ``protobuf`` library's descriptors are what every check works on.
The canonical form is the descriptor (less its file name and ``json_name``s) serialized
deterministically, so the same schema sent as text or as a descriptor is one schema.

Compatibility rules are ours, after Confluent's documented Protobuf difference types
(reader R, writer W; both directions are alike but for required fields): PACKAGE_CHANGED;
MESSAGE_REMOVED (a message of W missing in R); per field number present in both,
FIELD_KIND_CHANGED (scalar <-> message/enum), FIELD_SCALAR_KIND_CHANGED unless both kinds
are in one wire-compatible group ({int32, uint32, int64, uint64, bool}, {sint32,
sint64}, {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes}),
FIELD_NAMED_TYPE_CHANGED (another message or enum), FIELD_NUMERIC_LABEL_CHANGED
(repeated <-> singular but for string, bytes and messages, whose wire form is the same);
REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED (proto2); oneofs by name:
ONEOF_FIELD_REMOVED, FIELD_MOVED_TO_EXISTING_ONEOF, MULTIPLE_FIELDS_MOVED_TO_ONEOF.
Compatible, as Confluent has them: renaming, adding or removing an optional field, new
messages, adding, removing or renumbering enum values (proto3 enums are open: an unknown
number is kept), one field moved into a new oneof."""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.resources
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Final

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from broker.schema_registry.errors import invalid_schema
from broker.schema_registry.schema_base import PROTOBUF, ParsedSchema, ReferencedText

FDP = descriptor_pb2.FileDescriptorProto
FieldDP = descriptor_pb2.FieldDescriptorProto
MAIN_FILE: Final = "schema.proto"
PROTOC_TIMEOUT_S: Final = 30.0

_T = FieldDP
_GROUPS: Final = (
    {_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_INT64, _T.TYPE_UINT64, _T.TYPE_BOOL},
    {_T.TYPE_SINT32, _T.TYPE_SINT64},
    {_T.TYPE_FIXED32, _T.TYPE_SFIXED32},
    {_T.TYPE_FIXED64, _T.TYPE_SFIXED64},
    {_T.TYPE_STRING, _T.TYPE_BYTES},
)
_NAMED: Final = {_T.TYPE_MESSAGE, _T.TYPE_ENUM, _T.TYPE_GROUP}
_LENGTH_DELIMITED: Final = {_T.TYPE_STRING, _T.TYPE_BYTES, _T.TYPE_MESSAGE}


@dataclass(frozen=True, slots=True, eq=False)
class ProtobufSchema:
    schema_type: str
    canonical: str
    file: descriptor_pb2.FileDescriptorProto
    deps: tuple[descriptor_pb2.FileDescriptorProto, ...]  # the references', in order

    def reads(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"schema type changed from {writer.schema_type} to PROTOBUF"]
        return _reads(self.file, writer.file)

    def serialized(self) -> str:
        """The descriptor, base64 (``?format=serialized``)."""
        return base64.standard_b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")


def parse_protobuf(text: str, refs: list[ReferencedText]) -> ProtobufSchema:
    deps: list[descriptor_pb2.FileDescriptorProto] = []
    for ref in refs:
        deps.append(_file_of(ref.text, ref.name, tuple(deps)))
    file = _file_of(text, MAIN_FILE, tuple(deps))
    return ProtobufSchema(PROTOBUF, _canonical(file), file, tuple(deps))


def _canonical(file: descriptor_pb2.FileDescriptorProto) -> str:
    c = FDP()
    c.CopyFrom(file)
    c.ClearField("name")
    c.ClearField("source_code_info")

    def strip(msgs: object) -> None:
        for m in msgs:  # type: ignore[attr-defined]
            for f in m.field:
                f.ClearField("json_name")
            strip(m.nested_type)

    strip(c.message_type)
    return base64.standard_b64encode(c.SerializeToString(deterministic=True)).decode("ascii")


def _as_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        file = FDP()
        file.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.message_type or file.enum_type or file.package or file.syntax else None


def _file_of(
    text: str, name: str, deps: tuple[descriptor_pb2.FileDescriptorProto, ...]
) -> descriptor_pb2.FileDescriptorProto:
    file = _as_descriptor(text)
    if file is not None:
        if not file.name:
            file.name = name
        return file
    return _compile(text, name, tuple(d.SerializeToString(deterministic=True) for d in deps))


@functools.lru_cache(maxsize=1024)
def _compile(text: str, name: str, deps: tuple[bytes, ...]) -> descriptor_pb2.FileDescriptorProto:
    """``text`` compiled as file ``name`` by protoc, ``deps`` (serialized descriptors)
    importable; RegistryError 42201 with protoc's first error line when it does not."""
    try:
        include = str(importlib.resources.files("grpc_tools") / "_proto")
    except ModuleNotFoundError:
        raise invalid_schema(
            f"{text[:200]}, details: .proto text needs protoc, from the grpcio-tools package "
            "(pip install grpcio-tools); a base64 FileDescriptorProto is accepted without it"
        ) from None
    with tempfile.TemporaryDirectory(prefix="strata-proto-") as tmp:
        path = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}"]
        if deps:
            dep_set = descriptor_pb2.FileDescriptorSet()
            for raw in deps:
                dep_set.file.add().ParseFromString(raw)
            # protoc reads imports from the descriptor set; the main file still from -I.
            with open(os.path.join(tmp, "deps.pb"), "wb") as f:
                f.write(dep_set.SerializeToString())
            args.append(f"--descriptor_set_in={os.path.join(tmp, 'deps.pb')}")
        out = os.path.join(tmp, "out.pb")
        args += [f"--descriptor_set_out={out}", name]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise invalid_schema(
                f"{text[:200]}, details: protoc took over {PROTOC_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0:
            lines = [
                ln
                for ln in done.stderr.splitlines()
                if ln.strip() and "absl::" not in ln and not ln.startswith("W0")
            ]
            first = next((ln for ln in lines if ln.startswith(name)), lines[0] if lines else "protoc failed")
            first = first.replace(tmp + os.sep, "")
            raise invalid_schema(f"{text[:200]}, details: {first}")
        result = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            result.ParseFromString(f.read())
    return result.file[-1]


# --- compatibility ------------------------------------------------------------------------


def _messages(file: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, msgs: object) -> None:
        for m in msgs:  # type: ignore[attr-defined]
            full = f"{prefix}.{m.name}" if prefix else m.name
            out[full] = m
            walk(full, m.nested_type)

    walk(file.package, file.message_type)
    return out


def _reads(r: descriptor_pb2.FileDescriptorProto, w: descriptor_pb2.FileDescriptorProto) -> list[str]:
    out: list[str] = []
    if r.package != w.package:
        out.append(f"PACKAGE_CHANGED ({w.package!r} -> {r.package!r})")
    rm, wm = _messages(r), _messages(w)
    for name, wmsg in wm.items():
        rmsg = rm.get(name)
        if rmsg is None:
            if not wmsg.options.map_entry:
                out.append(f"#/{name}: MESSAGE_REMOVED")
            continue
        _fields(name, rmsg, wmsg, out)
    return out


def _fields(
    name: str, r: descriptor_pb2.DescriptorProto, w: descriptor_pb2.DescriptorProto, out: list[str]
) -> None:
    rf = {f.number: f for f in r.field}
    wf = {f.number: f for f in w.field}
    for num, wfield in wf.items():
        rfield = rf.get(num)
        if rfield is None:
            if wfield.label == FieldDP.LABEL_REQUIRED:
                out.append(f"#/{name}/{num}: REQUIRED_FIELD_REMOVED")
            continue
        where = f"#/{name}/{num}"
        r_named, w_named = rfield.type in _NAMED, wfield.type in _NAMED
        if r_named != w_named:
            out.append(f"{where}: FIELD_KIND_CHANGED")
        elif r_named:
            if rfield.type_name.lstrip(".") != wfield.type_name.lstrip("."):
                out.append(f"{where}: FIELD_NAMED_TYPE_CHANGED ({wfield.type_name} -> {rfield.type_name})")
        elif rfield.type != wfield.type and not any(rfield.type in g and wfield.type in g for g in _GROUPS):
            out.append(f"{where}: FIELD_SCALAR_KIND_CHANGED")
        relabelled = (rfield.label == FieldDP.LABEL_REPEATED) != (wfield.label == FieldDP.LABEL_REPEATED)
        # optional <-> repeated keeps the wire format of length-delimited values (string,
        # bytes, messages); numbers may be packed, which a singular field does not read.
        if relabelled and not {rfield.type, wfield.type} <= _LENGTH_DELIMITED:
            out.append(f"{where}: FIELD_NUMERIC_LABEL_CHANGED (repeated <-> singular)")
    for num, rfield in rf.items():
        if num not in wf and rfield.label == FieldDP.LABEL_REQUIRED:
            out.append(f"#/{name}/{num}: REQUIRED_FIELD_ADDED")
    _oneofs(name, r, w, rf, wf, out)


def _oneof_of(msg: descriptor_pb2.DescriptorProto, f: descriptor_pb2.FieldDescriptorProto) -> str | None:
    """The name of the real oneof ``f`` is in (a proto3 ``optional``'s synthetic one is none)."""
    if f.HasField("oneof_index") and not f.proto3_optional:
        return str(msg.oneof_decl[f.oneof_index].name)
    return None


def _oneofs(
    name: str,
    r: descriptor_pb2.DescriptorProto,
    w: descriptor_pb2.DescriptorProto,
    rf: dict[int, descriptor_pb2.FieldDescriptorProto],
    wf: dict[int, descriptor_pb2.FieldDescriptorProto],
    out: list[str],
) -> None:
    """Oneofs, matched by name: a field of one of W's oneofs that R keeps must stay in a
    oneof (ONEOF_FIELD_REMOVED otherwise: R would read two set fields where W wrote one);
    fields of W outside any oneof may move into a new oneof one at a time
    (MULTIPLE_FIELDS_MOVED_TO_ONEOF), never into one W had (FIELD_MOVED_TO_EXISTING_ONEOF)."""
    r_oneofs = {_oneof_of(r, f) for f in rf.values()} - {None}
    w_oneofs = {_oneof_of(w, f) for f in wf.values()} - {None}
    for num, wfield in wf.items():
        w_oneof = _oneof_of(w, wfield)
        if w_oneof is None or w_oneof not in r_oneofs:
            continue
        rfield = rf.get(num)
        if rfield is None or _oneof_of(r, rfield) is None:
            out.append(f"#/{name}/{num}: ONEOF_FIELD_REMOVED (from oneof {w_oneof})")
    moved: dict[str, int] = {}
    for num, rfield in rf.items():
        r_oneof = _oneof_of(r, rfield)
        wfield = wf.get(num)
        if r_oneof is None or wfield is None or _oneof_of(w, wfield) is not None:
            continue
        if r_oneof in w_oneofs:
            out.append(f"#/{name}/{num}: FIELD_MOVED_TO_EXISTING_ONEOF ({r_oneof})")
        else:
            moved[r_oneof] = moved.get(r_oneof, 0) + 1
    for oneof, count in sorted(moved.items()):
        if count > 1:
            out.append(f"#/{name}/oneof {oneof}: MULTIPLE_FIELDS_MOVED_TO_ONEOF")


# --- descriptor -> .proto text ------------------------------------------------------------


def text_form(text: str) -> str:
    """A stored Protobuf schema as ``.proto`` text (Confluent's default answer): a base64
    descriptor is rendered, text is returned as it was registered."""
    file = _as_descriptor(text)
    return to_proto_text(file) if file is not None else text


_SCALARS: Final = {
    getattr(FieldDP, f"TYPE_{n.upper()}"): n
    for n in (
        "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string",
        "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64",
    )
}  # fmt: skip


def to_proto_text(file: descriptor_pb2.FileDescriptorProto) -> str:
    """The ``.proto`` text of a descriptor (what the API answers for a schema registered as
    a base64 descriptor): syntax, package, imports, messages with nested types, oneofs and
    maps, enums and services. Options are left out but for ``packed`` and proto2 defaults."""
    syntax = file.syntax or "proto2"
    out = [f'syntax = "{syntax}";']
    if file.package:
        out.append(f"package {file.package};")
    if file.dependency:
        out.append("")
        out += [f'import "{d}";' for d in file.dependency]
    for m in file.message_type:
        out.append("")
        out += _message(m, "", syntax)
    for e in file.enum_type:
        out.append("")
        out += _enum(e, "")
    for s in file.service:
        out.append("")
        out.append(f"service {s.name} {{")
        for rpc in s.method:
            cin = "stream " if rpc.client_streaming else ""
            sout = "stream " if rpc.server_streaming else ""
            args, result = rpc.input_type.lstrip("."), rpc.output_type.lstrip(".")
            out.append(f"  rpc {rpc.name}({cin}{args}) returns ({sout}{result});")
        out.append("}")
    return "\n".join(out) + "\n"


def _enum(e: descriptor_pb2.EnumDescriptorProto, ind: str) -> list[str]:
    return [f"{ind}enum {e.name} {{", *(f"{ind}  {v.name} = {v.number};" for v in e.value), f"{ind}}}"]


def _type_name(f: descriptor_pb2.FieldDescriptorProto) -> str:
    return _SCALARS.get(f.type) or f.type_name.lstrip(".")


def _field(
    f: descriptor_pb2.FieldDescriptorProto, maps: dict[str, descriptor_pb2.DescriptorProto], syntax: str
) -> str:
    entry = maps.get(f.type_name.lstrip(".")) if f.type == FieldDP.TYPE_MESSAGE else None
    if entry is not None:
        k, v = entry.field[0], entry.field[1]
        return f"map<{_type_name(k)}, {_type_name(v)}> {f.name} = {f.number};"
    label = ""
    if f.label == FieldDP.LABEL_REPEATED:
        label = "repeated "
    elif f.label == FieldDP.LABEL_REQUIRED:
        label = "required "
    elif syntax == "proto2" or f.proto3_optional:
        label = "optional "
    opts = []
    if f.HasField("default_value"):
        quoted = f.type in (FieldDP.TYPE_STRING, FieldDP.TYPE_BYTES)
        opts.append(f'default = "{f.default_value}"' if quoted else f"default = {f.default_value}")
    if f.options.HasField("packed"):
        opts.append(f"packed = {'true' if f.options.packed else 'false'}")
    tail = f" [{', '.join(opts)}]" if opts else ""
    return f"{label}{_type_name(f)} {f.name} = {f.number}{tail};"


def _message(m: descriptor_pb2.DescriptorProto, parent: str, syntax: str, ind: str = "") -> list[str]:
    full = f"{parent}.{m.name}" if parent else m.name
    maps = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
    out = [f"{ind}message {m.name} {{"]
    inner = ind + "  "
    oneofs: dict[int, list[str]] = {}
    for f in m.field:
        line = _field(f, _maps_by_suffix(maps, f), syntax)
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneofs.setdefault(f.oneof_index, []).append(line)
            if len(oneofs[f.oneof_index]) == 1:
                out.append(f"{inner}oneof {m.oneof_decl[f.oneof_index].name} {{ @{f.oneof_index}")
            continue
        out.append(inner + line)
    rendered: list[str] = []
    for line in out:
        if line.endswith("}") or " { @" not in line:
            rendered.append(line)
            continue
        index = int(line.rsplit("@", 1)[1])
        rendered.append(line.rsplit(" @", 1)[0])
        rendered += [f"{inner}  {x}" for x in oneofs[index]]
        rendered.append(f"{inner}}}")
    for n in m.nested_type:
        if not n.options.map_entry:
            rendered += _message(n, full, syntax, inner)
    for e in m.enum_type:
        rendered += _enum(e, inner)
    for r in m.reserved_range:
        end = "max" if r.end >= 536870912 else str(r.end - 1)
        rendered.append(f"{inner}reserved {r.start}" + ("" if end == str(r.start) else f" to {end}") + ";")
    rendered.append(f"{ind}}}")
    return rendered


def _maps_by_suffix(
    maps: dict[str, descriptor_pb2.DescriptorProto], f: descriptor_pb2.FieldDescriptorProto
) -> dict[str, descriptor_pb2.DescriptorProto]:
    """The map entry a field's type names (its type name is package-qualified; ours are
    keyed by the message's name path): matched on the name path's suffix."""
    name = f.type_name.lstrip(".")
    for key, entry in maps.items():
        if name == key or name.endswith("." + key):
            return {name: entry}
    return {}
