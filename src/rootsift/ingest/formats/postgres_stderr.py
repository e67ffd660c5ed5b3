"""PostgreSQL stderr logs: ``log_line_prefix`` + ``SEVERITY:  message`` lines.

    2024-03-01 10:00:00.123 UTC [4242] app@shop LOG:  duration: 12.345 ms  statement: SELECT 1
    2024-03-01 10:00:01.002 UTC [4242] app@shop ERROR:  relation "nope" does not exist at character 15
    2024-03-01 10:00:01.002 UTC [4242] app@shop STATEMENT:  SELECT * FROM nope
        WHERE id = 1

The prefix is ``--log-line-prefix`` if given, else guessed from the first lines (see
``postgres_prefix``). Tab-indented lines continue the message before them; DETAIL, HINT,
CONTEXT, STATEMENT, QUERY and LOCATION lines of the same process fill fields of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, FormatOptions, Item, Lines, TextFormat
from rootsift.ingest.formats.postgres_common import SECONDARY, Assembler
from rootsift.ingest.formats.postgres_prefix import LoosePrefix, Prefix, detect
from rootsift.ingest.formats.postgres_time import PgTime
from rootsift.ingest.rejects import Reject

SAMPLE = 200
"""Lines read ahead to guess the prefix when none is given."""


@register
class PostgresStderr(TextFormat):
    name = "postgres-stderr"
    summary = "PostgreSQL stderr log (log_line_prefix given or guessed); statements joined with their durations"
    reads = ("log_line_prefix", "tz")

    def __init__(self, options: FormatOptions) -> None:
        super().__init__(options)
        self.clock = PgTime(options.zone(), bool(options.tz))

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        heads = [ln for ln in lines if ln and not ln[0].isspace()]
        if not heads or heads[0].startswith(("{", '"')):
            return 0.0
        prefix = detect(heads, PgTime(UTC, False))
        if prefix is None:
            return 0.0
        n = sum(1 for ln in heads if prefix.read(ln) is not None)
        return 0.9 * n / len(heads) if isinstance(prefix, Prefix) else 0.7 * n / len(heads)

    def parse(self, lines: Lines) -> Iterator[Item]:
        it = iter(lines)
        head = list(itertools.islice(it, SAMPLE))
        prefix: Prefix | LoosePrefix
        if self.options.log_line_prefix is not None:
            prefix = Prefix(self.options.log_line_prefix, self.clock)
        else:
            prefix = detect([ln for _, ln in head], self.clock) or Prefix("%m [%p] ", self.clock)
        read = prefix.read
        no_time = None if prefix.has_time else self.options.file_time()
        asm = Assembler()
        out = asm.out
        why = (
            "line has no time stamp and severity (LOG:, ERROR:, …) where a log line starts"
            if prefix.prefix == "(any)"
            else f"line does not start with the log_line_prefix {prefix.prefix!r} followed by a severity (LOG:, ERROR:, …)"
        )
        for number, line in itertools.chain(head, it):
            if not line:
                continue
            if line[0] in "\t ":
                got = read(line) if line[0] == " " else None
                if got is None:
                    if not asm.extend(line[1:] if line[0] == "\t" else line):
                        yield Reject(number, "continuation line with no message before it", line)
                    continue
            else:
                got = read(line)
            if got is None:
                asm.close()
                yield from asm.take()
                yield Reject(number, why, line)
                continue
            record, severity, message = got
            if TIME_KEY not in record:
                if no_time is None:
                    yield Reject(number, "no time stamp in the line's prefix", line)
                    continue
                record[TIME_KEY] = no_time
            if severity in SECONDARY:
                asm.attach(number, record, severity, message)
            else:
                record["severity"] = severity
                record["message"] = message
                asm.open(number, record)
            if out:
                yield from out
                out.clear()
        yield from asm.finish()
