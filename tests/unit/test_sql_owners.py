"""One owner per table: every statement lives in `device/store/` (or, for the
note tables, the Notebook's store in `device/notebook/`); every other product
module calls the store's named functions. ARCHITECTURE.md ("Where each table
lives") lists what each package calls.

The check reads each module's syntax tree: no SQL text, no statement
builder imported from SQLAlchemy, no statement run on a connection or a
session, no reach for a driver connection. Type names (`Session`,
`sqlite3.Connection`, `sqlite3.Error` to catch) are allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import ROOT

OWNERS = ("device/store/", "device/notebook/")
PRODUCT = ("device", "homebase", "relay", "protocol", "entry")
# Statements as the code spells them: keywords in capitals, with their shape.
_SQL = re.compile(
    r"^\s*(SELECT\b.*\bFROM\b|SELECT \w+\(|INSERT (OR \w+ )?INTO\b|UPDATE \w+ SET\b"
    r"|DELETE FROM\b|WITH \w+ AS \(|CREATE (TABLE|INDEX|TRIGGER|VIRTUAL)\b|PRAGMA \w+"
    r"|BEGIN (IMMEDIATE|DEFERRED)\b)",
    re.S,
)
_RUNS = {"execute", "executemany", "executescript", "exec_driver_sql"}
_SESSION_RUNS = {"execute", "scalar", "scalars", "get", "add", "add_all", "merge", "delete"}


def violations(source: str) -> list[str]:
    """What in ``source`` runs or spells a statement, one line each."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _SQL.match(node.value):
                found.append(f"{line}: SQL text {node.value[:40]!r}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "sqlalchemy" or node.module.startswith("sqlalchemy.sql"):
                found.append(f"{line}: a statement builder from {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr == "driver_connection":
            found.append(f"{line}: a driver connection taken")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            target = node.func.value
            if name in _RUNS:
                found.append(f"{line}: .{name}(...) runs a statement")
            elif (
                name in _SESSION_RUNS
                and isinstance(target, ast.Name)
                and target.id in {"session", "conn", "con", "connection"}
            ):
                found.append(f"{line}: {target.id}.{name}(...) runs a statement")
    return found


def _modules() -> list[Path]:
    out = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(OWNERS):
                out.append(path)
    return out


def test_no_statement_outside_the_store() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): v
        for path in _modules()
        if (v := violations(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "planted",
    [
        'ROWS = "SELECT id FROM note WHERE zone = ?"',
        "from sqlalchemy import select",
        "conn.execute(QUERY)",
        "session.scalars(stmt)",
        "raw = fairy.driver_connection",
        "session.connection().exec_driver_sql(MARK, (1, 2))",
    ],
)
def test_the_check_catches_a_planted_statement(planted: str) -> None:
    assert violations(planted)
    clean = "from sqlalchemy.orm import Session\nimport sqlite3\ntext = 'selected works'\n"
    assert violations(clean) == []
