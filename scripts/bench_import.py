"""Benchmarks for `pixie import` of real-life formats.

Every figure is paired with a baseline measured in the same run, on the same
file, and reported as a ratio:

* mbox and WhatsApp throughput: the whole import (the importer's items
  written into the log in one durable transaction, contacts merged, ids
  derived) against a bare parse of the same file (the standard library's
  mailbox and email parser for every message; the WhatsApp line matcher
  alone). Target: import rate >= 0.5x the bare parse.
* the same imports against the floor of any import: that bare parse plus a
  raw sqlite3 ``executemany`` of the rows the import wrote into an equal
  table (same DDL, WAL, synchronous=FULL, one durable commit). It shows what
  the import adds beyond reading the file and writing its rows: ids,
  contacts, the state digest and the text mirror. For a chat export, whose
  lines are cheap to parse, the write alone costs more than twice the parse,
  so no import can reach 0.5x of the bare parse there; this ratio is the one
  that says how far the import is from what is possible.
* memory: peak resident memory of a `pixie import` process on a small mbox
  and on a large one (``--mbox-mb``, 1,000 for the 1 GB case), against the
  same process importing a nearly empty mbox: bounded means the large file
  costs about what the small one does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pixie.device.ingest import mbox, whatsapp
from pixie.device.ingest.base import ImportOptions
from pixie.device.ingest.load import load
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import Row, as_row
from pixie.device.store.provision import create_data_dir

PEOPLE = [
    ("Priya Raman", "priya@helix.example"),
    ("Tomás Ferreira", "tomas@porto.example"),
    ("Ada Okafor", "ada@northwind.example"),
    ("Lena Vogel", "lena@berlin.example"),
    ("Sam Carter", "sam@lake.example"),
]
ME = ("Ana Lima", "ana@example.org")
WORDS = (
    "lunch tomorrow draft report flight Lisbon dentist invoice review garden "
    "climbing birthday project deadline coffee train moving offer kids weekend"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_mbox(path: Path, target_bytes: int, seed: int = 3) -> int:
    """An mbox of about ``target_bytes``: threads of replies with quotes and
    signatures, some multipart with an HTML part and an attachment."""
    rng = random.Random(seed)
    count = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while out.tell() < target_bytes:
            name, addr = rng.choice(PEOPLE)
            mine = rng.random() < 0.4
            sender, to = (ME, (name, addr)) if mine else ((name, addr), ME)
            day = 1 + count % 28
            date = f"Fri, {day:02d} Mar 2024 {count % 24:02d}:{count % 60:02d}:00 +0000"
            body = "\n".join(sentence(rng, rng.randint(6, 20)) for _ in range(rng.randint(2, 8)))
            quoted = "\n".join("> " + sentence(rng, 8) for _ in range(rng.randint(0, 6)))
            out.write(f"From {sender[1]} Fri Mar {day:02d} 10:00:00 2024\n")
            out.write(f"From: {sender[0]} <{sender[1]}>\nTo: {to[0]} <{to[1]}>\n")
            out.write(f"Subject: Re: {rng.choice(WORDS)} {count // 5}\nDate: {date}\n")
            out.write(f"Message-ID: <m{count}@bench.example>\n")
            if count % 5:
                out.write(f"In-Reply-To: <m{count - count % 5}@bench.example>\n")
            if count % 7 == 0:
                boundary = f"b{count}"
                out.write(
                    f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{boundary}"\n\n'
                )
                out.write(f"--{boundary}\nContent-Type: text/plain; charset=utf-8\n\n{body}\n")
                out.write(
                    f"--{boundary}\nContent-Type: application/pdf\n"
                    'Content-Disposition: attachment; filename="notes.pdf"\n'
                    "Content-Transfer-Encoding: base64\n\nJVBERi0xLjQKJcfsj6IK\n"
                    f"--{boundary}--\n\n"
                )
            else:
                out.write(f"Content-Type: text/plain; charset=utf-8\n\n{body}\n")
                if quoted:
                    out.write(f"\nOn Thu, someone wrote:\n{quoted}\n")
                out.write(f"\n-- \n{sender[0]}\n\n")
            count += 1
    return count


def write_whatsapp(path: Path, messages: int, seed: int = 4) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write(
            "14/03/2023, 09:00 - Messages and calls are end-to-end encrypted. "
            "No one outside of this chat, not even WhatsApp, can read or listen to them.\n"
        )
        for i in range(messages):
            minute = i // 3
            stamp = f"{1 + minute // 1440 % 28:02d}/{1 + minute // 40320 % 12:02d}/2024, "
            stamp += f"{minute // 60 % 24:02d}:{minute % 60:02d}"
            who = ME[0] if rng.random() < 0.5 else "Priya Raman"
            text = sentence(rng, rng.randint(3, 18))
            if i % 11 == 0:
                text += "\n" + sentence(rng, 5)
            out.write(f"{stamp} - {who}: {text}\n")


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best(fn: Callable[[], object], runs: int = 3) -> float:
    return min(timed(fn) for _ in range(runs))


@dataclass
class Imported:
    """One timed import, and what it wrote to the log (for the write floor)."""

    seconds: float
    rows: list[Row]
    ddl: list[str]


def import_time(
    tmp: Path, name: str, importer: object, path: Path, me: tuple[str, ...]
) -> Imported:
    data = tmp / f"data-{name}"
    create_data_dir(data, name="bench", role="device")
    options = ImportOptions(me=me, now_us=time.time_ns() // 1000)
    with Node.open(data) as node:
        read = importer.read  # type: ignore[attr-defined]
        elapsed = timed(lambda: load(node.log, read(path, options, None)))
        rows = [as_row(n, r) for n, r in enumerate(node.log.all_records(), start=1)]
        con = sqlite3.connect(node.db.path)
        ddl = [
            sql
            for (sql,) in con.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = 'memory_event' "
                "AND type IN ('table', 'index') AND sql IS NOT NULL"
            )
        ]
        con.close()
    assert rows, f"{name}: nothing imported"
    return Imported(elapsed, rows, ddl)


def parse_and_write_floor(
    tmp: Path, name: str, done: Imported, parse: Callable[[], object]
) -> float:
    """Seconds for the floor of an import: the bare parse of the file, then a
    raw sqlite3 ``executemany`` of the rows the import wrote into an equal
    table (same DDL, WAL, synchronous=FULL) in one durable transaction."""
    con = sqlite3.connect(tmp / f"floor-{name}.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    for sql in done.ddl:
        con.execute(sql)
    placeholders = ",".join("?" * len(done.rows[0]))

    def run() -> None:
        parse()
        con.execute("BEGIN IMMEDIATE")
        con.executemany(f"INSERT INTO memory_event VALUES ({placeholders})", done.rows)
        con.execute("COMMIT")

    elapsed = timed(run)
    con.close()
    return elapsed


def peak_rss_mb(data: Path, path: Path) -> float:
    """Peak resident memory of one `pixie import` process, in MB."""
    create_data_dir(data, name="bench", role="device")
    # VmHWM is the peak of this process's own memory since its exec; the
    # rusage peak (ru_maxrss) would also count the parent's at fork.
    code = (
        "import resource, sys\n"
        "from pixie.entry.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "try:\n"
        "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
        "    print(int(status.split()[0]))\n"
        "except (OSError, IndexError):\n"
        "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--data", str(data), "import", str(path), "--me", ME[1]],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mbox-mb", type=int, default=50, help="size of the throughput mbox")
    parser.add_argument("--whatsapp-messages", type=int, default=100_000)
    parser.add_argument(
        "--memory-mb",
        type=int,
        nargs="*",
        default=[20, 200],
        help="mbox sizes for the peak-memory figure (1000 for the 1 GB case)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="pixie-bench-import-") as name:
        tmp = Path(name)
        # Keys of these throwaway data dirs go to files beside them, never to
        # the user's keychain (the child processes inherit the setting).
        os.environ["PIXIE_KEYSTORE"] = "file"
        os.environ["PIXIE_KEYS"] = str(tmp / "keys")
        box = tmp / "mail.mbox"
        messages = write_mbox(box, args.mbox_mb * 1_000_000)
        t_bare = best(lambda: mbox.bare_parse(box))
        done = import_time(tmp, "mbox", mbox.IMPORTER, box, (ME[1],))
        t_floor = parse_and_write_floor(tmp, "mbox", done, lambda: mbox.bare_parse(box))
        results["mbox"] = {
            "messages": messages,
            "mb": round(box.stat().st_size / 1e6, 1),
            "bare_parse_msgs_per_s": round(messages / t_bare),
            "import_msgs_per_s": round(messages / done.seconds),
            "import_vs_bare_parse": round(t_bare / done.seconds, 2),
            "parse_and_write_floor_msgs_per_s": round(messages / t_floor),
            "import_vs_parse_and_write_floor": round(t_floor / done.seconds, 2),
        }
        box.unlink()
        chat = tmp / "WhatsApp Chat with Priya Raman.txt"
        write_whatsapp(chat, args.whatsapp_messages)
        count = args.whatsapp_messages
        t_bare = best(lambda: whatsapp.bare_parse(chat))
        done = import_time(tmp, "whatsapp", whatsapp.IMPORTER, chat, (ME[0],))
        t_floor = parse_and_write_floor(tmp, "whatsapp", done, lambda: whatsapp.bare_parse(chat))
        results["whatsapp"] = {
            "messages": count,
            "bare_parse_msgs_per_s": round(count / t_bare),
            "import_msgs_per_s": round(count / done.seconds),
            "import_vs_bare_parse": round(t_bare / done.seconds, 2),
            "parse_and_write_floor_msgs_per_s": round(count / t_floor),
            "import_vs_parse_and_write_floor": round(t_floor / done.seconds, 2),
        }
        del done
        memory: dict[str, float] = {}
        tiny = tmp / "tiny.mbox"
        write_mbox(tiny, 1)
        memory["baseline_one_message_mb"] = round(peak_rss_mb(tmp / "rss-tiny", tiny), 1)
        for size in args.memory_mb:
            big = tmp / f"big-{size}.mbox"
            write_mbox(big, size * 1_000_000, seed=size)
            rss = peak_rss_mb(tmp / f"rss-{size}", big)
            memory[f"mbox_{size}mb_peak_mb"] = round(rss, 1)
            memory[f"mbox_{size}mb_vs_baseline"] = round(rss / memory["baseline_one_message_mb"], 2)
            big.unlink()
        results["memory"] = memory
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for suite, figures in results.items():
            print(f"{suite}:")
            for key, value in figures.items():  # type: ignore[attr-defined]
                print(f"  {key}: {value:,}" if isinstance(value, int) else f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
