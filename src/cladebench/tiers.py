"""Options in two tiers: the few a researcher changes daily as ``--options``, every setting by key.

A config that names its daily fields (:data:`cladebench.config.SHOWN`) lists only those in ``--help``; every
setting with a default, those included, is also given as ``--setting KEY=VALUE`` (repeatable) or in a file,
``--settings FILE.toml`` (``KEY = VALUE`` lines). Each value is read by the one conversion of typed words
(:func:`cladebench.config.parse_text`) and checked by the config itself when it is built, so the ranges and the
messages are the same in every tier, and what a run records does not depend on the tier that set a value. The
suite's ``--setting`` reads its words here too (:func:`parse_words`, :func:`typed_setting`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import textwrap
import tomllib
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from cladebench.config import (
    field_default,
    field_docs,
    first_sentence,
    parse_text,
    setting_fields,
    shown_options,
)
from cladebench.errors import EXIT_BROKEN_PIPE, UnknownNameError, UsageError

WORDS_DEST = "tier_setting_words"
"""Where the parsed namespace keeps the ``--setting`` words (no config field is called so)."""
FILE_DEST = "tier_settings_file"
"""Where the parsed namespace keeps the ``--settings`` file."""
CLOSEST = 3
"""Known keys named beside an unknown one."""


def parse_words(words: Sequence[str], option: str = "--setting") -> dict[str, tuple[str, str]]:
    """``KEY=VALUE`` words as key (``-`` read as ``_``) -> (the word as typed, the raw value); a word without ``=``
    or a key given twice is a usage error."""
    out: dict[str, tuple[str, str]] = {}
    for word in words:
        name, equals, value = word.partition("=")
        key = name.strip().replace("-", "_")
        if not equals or not key:
            raise UsageError(f"{option} {word!r}: expected KEY=VALUE (e.g. repetitions=1)")
        if key in out:
            raise UsageError(f"{option} names {key} twice")
        out[key] = (word, value)
    return out


def as_typed(word: str) -> str:
    """A word from the command line as a one-line message shows it: as typed, or quoted with its escapes where it
    holds a line break or another character a terminal would act on."""
    return word if word.isprintable() else repr(word)


def unknown_setting(origin: str, key: str, known: Iterable[str], where: str) -> UnknownNameError:
    """The refusal of a key no field has: where it was given, and the closest known keys."""
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=CLOSEST, cutoff=0.0)
    return UnknownNameError(f"{origin}: {where} has no setting {key!r}; closest: {', '.join(close)}")


def typed_setting(cls: type, key: str, value: object, origin: str) -> object:
    """``value`` (a word, or a TOML value) as a value of ``cls``'s field ``key``: the conversion of an option's
    word, with ``origin`` (the key as typed) naming it in any refusal."""
    hint = typing.get_type_hints(cls)[key]
    several = any(get_origin(a) in (tuple, list) for a in (hint, *get_args(hint)))
    if isinstance(value, dict):
        raise UsageError(f"{origin}: expected a value, got a table")
    if isinstance(value, list):
        if not several:
            raise UsageError(f"{origin}: expected one value, got a list")
        if any(isinstance(item, (list, dict)) for item in value):
            raise UsageError(f"{origin}: expected a list of values, got a nested one")
        value = ",".join(_text(item) for item in value)
    return parse_text(hint, _text(value), origin)


def _text(value: object) -> str:
    """A TOML scalar as the word it would be on the command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


SETTINGS_FILE_BYTES = 1 << 20
"""Most bytes a settings file may hold: a few dozen settings take a few kilobytes; a device or a mistaken path
(``/dev/zero``, a dataset's file) is refused instead of read into memory."""


def read_settings_file(path: Path) -> dict[str, object]:
    """The ``KEY = VALUE`` lines of a TOML file; a missing or unreadable file, one that is not a regular file of at
    most :data:`SETTINGS_FILE_BYTES`, one that is not TOML, or a section (``[name]``) in it is a usage error in
    one line."""
    try:
        if path.exists() and not path.is_file():
            raise UsageError(f"--settings {path}: not a regular file (give a TOML file of KEY = VALUE lines)")
        with path.open("rb") as file:
            data = file.read(SETTINGS_FILE_BYTES + 1)
        if len(data) > SETTINGS_FILE_BYTES:
            raise UsageError(f"--settings {path}: larger than {SETTINGS_FILE_BYTES:,} bytes; a settings file holds "
                             "KEY = VALUE lines")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--settings {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--settings {path}: cannot be read as UTF-8 text ({type(exc).__name__})") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--settings {path}: not TOML ({' '.join(str(exc).split())})") from None
    for key, value in table.items():
        if isinstance(value, dict):
            raise UsageError(f"--settings {path}: [{key}] is a table; give each setting as KEY = VALUE at the top "
                             "of the file")
    return table


def keyed_settings(cls: type, args: argparse.Namespace, where: str) -> dict[str, tuple[str, object]]:
    """Field -> (where it was given, its value) of every setting given by key on the parsed command line: the
    ``--settings`` file's, then the ``--setting`` words'; a key in both with another value, or one no field of
    ``cls`` has, is a usage error (``where`` names the command in it)."""
    known = {f.name for f in setting_fields(cls)}
    given: list[tuple[str, str, object]] = []  # (key, origin, value as given)
    file = getattr(args, FILE_DEST, None)
    if file is not None:
        given += [(key.replace("-", "_"), f"--settings {file}: {as_typed(key)}", value)
                  for key, value in read_settings_file(Path(file).expanduser()).items()]
    given += [(key, f"--setting {as_typed(word)}", value)
              for key, (word, value) in parse_words(getattr(args, WORDS_DEST, None) or ()).items()]
    out: dict[str, tuple[str, object]] = {}
    for key, origin, raw in given:
        if key not in known:
            raise unknown_setting(origin, key, known, where)
        value = typed_setting(cls, key, raw, origin)
        if key in out and out[key][1] != value:
            raise UsageError(f"{key} is given twice ({out[key][0]} and {origin}); give it once")
        out[key] = (origin, value)
    return out


def add_tier_arguments(parser: argparse.ArgumentParser, cls: type, prog: str) -> None:
    """``--setting``, ``--settings`` and ``--settings-help`` on the parser of a config with tiers, and the last
    line of its help saying where every setting is listed."""
    parser.add_argument("--setting", action="append", dest=WORDS_DEST, metavar="KEY=VALUE",
                        help="any setting by key, e.g. --setting stream=always (repeatable)")
    parser.add_argument("--settings", dest=FILE_DEST, metavar="FILE.toml",
                        help="settings from a TOML file of KEY = VALUE lines")
    parser.add_argument("--settings-help", action=_SettingsHelp, nargs=0, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, settings=(prog, cls))
    parser.epilog = f"All {len(setting_fields(cls))} settings: {prog} --settings-help (or docs/reference.md)"


class _SettingsHelp(argparse.Action):
    """Print every setting of the config and exit, as ``--help`` does."""

    def __init__(self, *args: Any, settings: tuple[str, type], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        prog, cls = self.settings
        try:
            print(settings_text(prog, cls), flush=True)
        except BrokenPipeError:  # `| head`: stop quietly, as every verb does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            parser.exit(EXIT_BROKEN_PIPE)
        parser.exit(0)


def describe(cls: type) -> list[tuple[str, str, str, str, bool]]:
    """Each setting of ``cls`` as (key, kind of value, default, first sentence of its docstring, whether it is an
    option in ``--help`` too), in field order: the list ``--settings-help`` and the reference show."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    shown = shown_options(cls) or ()
    return [(f.name, _kind(hints[f.name]), _default(field_default(f)), first_sentence(docs.get(f.name, "")),
             f.name in shown) for f in setting_fields(cls)]


def settings_text(prog: str, cls: type) -> str:
    """``--settings-help``: every setting with its kind, default and meaning; ``*`` marks the shown options."""
    lines = [*textwrap.wrap(f"Every setting of {prog}: --setting KEY=VALUE (repeatable) or --settings FILE.toml "
                            "(KEY = VALUE lines); * marks those that are also options (--KEY-NAME) in --help.", 118),
             ""]
    for key, kind, default, what, shown in describe(cls):
        head = textwrap.wrap(f"{key}{' *' if shown else ''} ({kind}, default {default})", 118,
                             initial_indent="  ", subsequent_indent="      ")
        lines += [*head, *textwrap.wrap(what, 118, initial_indent="      ", subsequent_indent="      ")]
    return "\n".join(lines)


def _kind(hint: object) -> str:
    """What a value of a field looks like, in words (``integer``, ``list of text``, ``one of a|b``)."""
    args = [a for a in get_args(hint) if a is not type(None)]
    if args and get_origin(hint) not in (tuple, list, Literal):  # X | None
        return _kind(args[0])
    if get_origin(hint) in (tuple, list):
        return f"list of {_kind(args[0]) if args else 'text'}"
    if get_origin(hint) is Literal:
        return "one of " + "|".join(map(str, args))
    words: dict[object, str] = {bool: "true/false", int: "integer", float: "number", Path: "path"}
    return words.get(hint, "text")


def _default(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "empty"
    return str(value) if str(value) else "empty"

