"""`strata consume` and `strata produce` with kcat's options, run as a user runs them
(subprocesses of the CLI) against a real broker: start offsets (-o N, -N, s@MS, s@ISO,
beginning, end), -e (stop at the end), -f formats, JSON safe for binary data, and binary
input, delimiters, keys, headers, compression and acks on produce."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.brokers import ROOT, BrokerProcess, create_topic


def strata(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, input=stdin, capture_output=True, timeout=120
    )


def ok(r: subprocess.CompletedProcess[bytes]) -> bytes:
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess[bytes], text: str) -> None:
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b"", (r.stdout, err)
    assert err.startswith("strata: error: ") and err.count("\n") == 1, err
    assert text in err, err


def test_consume_start_offsets_stop_at_end_and_formats(broker: BrokerProcess) -> None:
    topic = "kcat-offsets"
    create_topic(broker.bootstrap, topic, 2)
    bs = ("-b", broker.bootstrap)
    ok(
        strata(
            "produce",
            topic,
            *bs,
            "-p",
            "0",
            "-K",
            ":",
            "-H",
            "h=1",
            stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(10)),
        )
    )
    ok(strata("produce", topic, *bs, "-p", "1", stdin=b"a\nb\nc\n"))
    pos = ("-f", r"%p:%o\n", "-e")

    # -N: N before the end of each partition (kept within the log); -e ends at the end
    out = ok(strata("consume", topic, *bs, "-o", "-2", *pos))
    assert sorted(out.split()) == [b"0:8", b"0:9", b"1:1", b"1:2"]
    assert ok(strata("consume", topic, *bs, "-p", "1", "-o", "-100", *pos)).split() == [
        b"1:0",
        b"1:1",
        b"1:2",
    ]
    assert ok(strata("consume", topic, *bs, "-p", "0", "-o", "7", *pos)).split() == [b"0:7", b"0:8", b"0:9"]
    assert ok(strata("consume", topic, *bs, "-o", "end", *pos)) == b""
    assert ok(strata("consume", topic, *bs, "-o", "e", *pos)) == b""
    assert len(ok(strata("consume", topic, *bs, "-o", "beginning", *pos)).split()) == 13
    # no -o: from the beginning, as kcat and rpk (-e alone printed nothing when it was the end)
    assert len(ok(strata("consume", topic, *bs, *pos)).split()) == 13

    # kcat's -K and -D (escapes too) and -c
    out = ok(strata("consume", topic, *bs, "-p", "0", "-o", "-2", "-e", "-K", "=", "-D", r"\t"))
    assert out == b"k8=v8\tk9=v9\t"
    assert ok(strata("consume", topic, *bs, "-p", "1", "-o", "beginning", "-c", "2", "-D", "%;")) == b"a%;b%;"

    # every kcat token and escape
    fmt = r"%t %p %o %k %s %h %K %S %%\t|\x41\n"
    out = ok(strata("consume", topic, *bs, "-p", "0", "-o", "-1", "-e", "-f", fmt))
    assert out == f"{topic} 0 9 k9 v9 h=1 2 2 %\t|A\n".encode()
    stamp = ok(strata("consume", topic, *bs, "-p", "0", "-o", "-1", "-e", "-f", "%T"))
    assert abs(int(stamp) - time.time() * 1000) < 600_000

    # s@: the first record at or after a time, in ms or ISO 8601; after the last: the end
    middle = int(time.time() * 1000)
    time.sleep(0.01)
    ok(strata("produce", topic, *bs, "-p", "0", stdin=b"late1\nlate2\n"))
    iso = datetime.datetime.fromtimestamp(middle / 1000, datetime.UTC).isoformat()
    for spec in (f"s@{middle}", f"s@{iso}"):
        out = ok(strata("consume", topic, *bs, "-p", "0", "-o", spec, "-e", "-f", r"%o %s\n"))
        assert out == b"10 late1\n11 late2\n", spec
    assert ok(strata("consume", topic, *bs, "-o", f"s@{middle + 3_600_000}", "-e")) == b""
    # e@: stop before the first record at or after a time (no -e needed); a group resumes there
    stopped = ("consume", topic, *bs, "-p", "0", "-o", "beginning", "-o", f"e@{middle}", "-f", r"%o\n")
    assert ok(strata(*stopped, "-g", "stopper")).split() == [str(i).encode() for i in range(10)]
    assert ok(strata("consume", topic, *bs, "-p", "0", "-g", "stopper", "-e", "-f", r"%o\n")) == b"10\n11\n"
    # a group without commits starts at the beginning too; then at its commits
    assert len(ok(strata("consume", topic, *bs, "-g", "fresh", *pos)).split()) == 15
    assert ok(strata("consume", topic, *bs, "-g", "fresh", *pos)) == b""

    # the output: -J (kcat's) or --output json; -o json still works for one release, with a
    # one-line note on stderr naming the new flag
    for flags in (("-J",), ("--output", "json"), ("-o", "json")):
        r = strata("consume", topic, *bs, "-p", "1", *flags, "-o", "-1", "-e")
        docs = [json.loads(x) for x in ok(r).splitlines()]
        assert [(d["offset"], d["value"]) for d in docs] == [(2, "c")], flags
        note = "strata: note: -o json is deprecated: -o is the start offset; use -J (or --output json)\n"
        assert r.stderr.decode() == (note if flags[0] == "-o" else ""), (flags, r.stderr)
    r = strata("consume", topic, *bs, "-p", "1", "-o", "text", "-o", "-1", "-e")
    assert ok(r) == b"c\n" and r.stderr.decode().count("\n") == 1 and "use --output text" in r.stderr.decode()
    one_line_error(strata("consume", topic, *bs, "-J", "--output", "text"), "-J is JSON output")

    one_line_error(strata("consume", topic, *bs, "-o", "abc"), "-o: expected an offset N, -N")
    one_line_error(strata("consume", topic, *bs, "-o", "s@yesterday"), "ISO 8601")
    one_line_error(strata("consume", topic, *bs, "-o", "e@later"), "-o e@: expected milliseconds")
    one_line_error(strata("consume", topic, *bs, "-o", "1", "--offset", "2"), "at most one start offset")
    one_line_error(strata("consume", topic, *bs, "-f", "%q"), "-f: unknown token %q")
    one_line_error(strata("consume", topic, *bs, "-f", r"\q"), r"-f: unknown escape \q")
    one_line_error(strata("consume", topic, *bs, "-o", "stored"), "give --group")
    one_line_error(strata("consume", topic, *bs, "-p", "0", "-o", "99", "-e"), f"outside {topic}-0")
    one_line_error(strata("consume", topic, *bs, "-J", "-f", "%s"), "-f, -K and -D give the whole record")
    one_line_error(strata("consume", topic, *bs, "-K", ":", "-f", "%s"), "-f gives the whole record")


def test_binary_records_round_trip(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "kcat-binary"
    create_topic(broker.bootstrap, topic, 1)
    bs = ("-b", broker.bootstrap)
    blob = bytes(range(256)) * 4  # every byte value, newlines included
    path = tmp_path / "blob.bin"
    path.write_bytes(blob)
    # --raw: the whole input is one record, from a file or stdin, bytes as they are
    ok(strata("produce", topic, *bs, "--raw", "--file", str(path), "-k", "file"))
    ok(strata("produce", topic, *bs, "--raw", "-H", "kind=raw", stdin=b"\xff\xfe\x00\n"))
    # -K splits keys off at the first separator (kcat's escapes), whatever the bytes
    ok(strata("produce", topic, *bs, "-K", r"\t", stdin=b"\x80key\t\x00value\nplain\ttext\n"))

    # arguments that are not UTF-8 (a header, a key) are taken as their bytes
    r = subprocess.run(
        [sys.executable, "-m", "api.cli", "produce", topic, *bs, "-H", b"h=\xfe", "-k", b"\xfd", "--raw"],
        cwd=ROOT, input=b"v", capture_output=True, timeout=120,
    )  # fmt: skip
    ok(r)

    # JSON: text where UTF-8, else also the exact bytes in *_base64 fields
    out = ok(strata("consume", topic, *bs, "--offset", "beginning", "-e", "-J"))
    docs = [json.loads(line) for line in out.splitlines()]
    assert len(docs) == 5
    assert docs[0]["key"] == "file" and "key_base64" not in docs[0]
    assert base64.b64decode(docs[0]["value_base64"]) == blob
    assert base64.b64decode(docs[1]["value_base64"]) == b"\xff\xfe\x00\n" and docs[1]["key"] is None
    assert docs[1]["headers"] == [{"key": "kind", "value": "raw"}]
    assert base64.b64decode(docs[2]["key_base64"]) == b"\x80key" and docs[2]["value"] == "\x00value"
    assert (docs[3]["key"], docs[3]["value"]) == ("plain", "text") and "value_base64" not in docs[3]
    assert base64.b64decode(docs[4]["key_base64"]) == b"\xfd"
    assert base64.b64decode(docs[4]["headers"][0]["value_base64"]) == b"\xfe"
    # -f writes keys and values byte for byte
    assert ok(strata("consume", topic, *bs, "-o", "0", "-e", "-n", "1", "-f", "%s")) == blob
    assert (
        ok(strata("consume", topic, *bs, "-o", "2", "-e", "-f", r"%k|%s\n"))
        == b"\x80key|\x00value\nplain|text\n\xfd|v\n"
    )


def test_produce_delimiters_compression_and_acks(broker: BrokerProcess) -> None:
    topic = "kcat-produce"
    create_topic(broker.bootstrap, topic, 1)
    bs = ("-b", broker.bootstrap)
    sent = []
    for i, (codec, acks) in enumerate(
        [("gzip", "all"), ("snappy", "1"), ("lz4", "all"), ("zstd", "1"), ("none", "0")]
    ):
        values = [f"{codec}-{n}-" + "x" * 200 for n in range(3)]
        out = ok(
            strata(
                "produce",
                topic,
                *bs,
                "-z",
                codec,
                "--acks",
                acks,
                "-D",
                ";",
                "-H",
                f"n={i}",
                "-H",
                "c=" + codec,
                stdin=";".join(values).encode() + b";",
            )
        )
        assert out.startswith(b"produced 3 records "), out
        sent += [(v, f"n={i},c={codec}") for v in values]
    out = ok(strata("consume", topic, *bs, "-o", "beginning", "-e", "-f", r"%s %h\n"))
    assert [tuple(line.split(" ")) for line in out.decode().splitlines()] == sent

    r = strata("produce", topic, *bs, "-z", "brotli")
    assert r.returncode == 2 and b"'brotli' is not one of" in r.stderr, r.stderr  # click's usage error
    one_line_error(strata("produce", topic, *bs, "-D", ""), "--delimiter must not be empty")
    one_line_error(strata("produce", topic, *bs, "-D", r"\xZ1"), r"--delimiter: \x needs two hex digits")
    one_line_error(strata("produce", topic, *bs, "--raw", "-D", ";"), "--raw sends the whole input")
    one_line_error(strata("produce", topic, *bs, "-K", ":", "-D", ";", stdin=b"a:1;b2;"), "stdin record 2")
