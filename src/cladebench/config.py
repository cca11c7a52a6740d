"""Frozen dataclass configs, and the command line generated from them.

A config is the one description of what a verb does: its fields, types, defaults and the docstring
under each field. The CLI reads all four from the class, so ``--help`` can never drift from the
Python API, and booleans become ``--flag/--no-flag`` instead of the ``type=bool`` trap (where
``--flag False`` is true).

A field without a default becomes a positional argument; one with ``field(metadata=OPTION)`` becomes a required
``--option``. ``tuple[str, ...]`` fields take several values, ``Literal`` fields become choices.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Greet:
    ...     name: str
    ...     '''Who to greet.'''
    ...     loud: bool = False
    ...     '''Shout.'''
    >>> parser = argparse.ArgumentParser(prog="greet")
    >>> add_config_arguments(parser, Greet)
    >>> config_from_args(Greet, parser.parse_args(["Ada", "--loud"]))
    Greet(name='Ada', loud=True)

Range checks (:func:`at_least`, :func:`at_most`, :func:`positive`, :func:`non_negative`) name the option a user
typed, and configs call them from ``__post_init__``: a setting out of range is the user's mistake, refused when the
config is built as a :class:`~cladebench.errors.UsageError` (exit 2), not deep in a computation as a bug (exit 70).

    >>> at_least("--shots", 0, 1)
    Traceback (most recent call last):
    ...
    cladebench.errors.UsageError: --shots must be at least 1, got 0
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import math
import re
import textwrap
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

from cladebench.errors import UsageError, unknown_name

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

_OPTION_KEY = "cladebench.option"
OPTION: dict[str, bool] = {_OPTION_KEY: True}
"""Field metadata for a field with no default that the CLI asks for as a required ``--option``:
``out: Path = field(metadata=OPTION)``."""
_POSITIONAL_KEY = "cladebench.positional"
POSITIONAL: dict[str, bool] = {_POSITIONAL_KEY: True}
"""Field metadata for a field with a default that the CLI takes as an optional positional argument:
``text: str | None = field(default=None, metadata=POSITIONAL)`` (``cladebench search DATASET [TEXT]``)."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstrings written under each field of a dataclass, read from its source."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        statements = body.body
        for node, following in zip(statements, [*statements[1:], None], strict=True):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _unwrap_optional(annotation: object) -> tuple[object, bool]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


_BARE_KEY = "cladebench.bare"
_INTERNAL_KEY = "cladebench.internal"
INTERNAL: dict[str, bool] = {_INTERNAL_KEY: True}
"""Field metadata for a field the command line never offers (it is filled by the code that builds the config)."""
GIVEN = "given"
"""Name of the field in which a config that declares it receives the names of the settings the user gave (the
command line's options typed, or the keywords of a Python call): a default is then never mistaken for a choice."""


def setting_fields(cls: type) -> list[dataclasses.Field]:
    """The fields a user may set by key (``--setting KEY=VALUE``): every one the command line offers that has a
    default (a positional or a required option is typed as such)."""
    return [f for f in dataclasses.fields(cls) if f.init and not f.metadata.get(_INTERNAL_KEY)
            and field_default(f) is not dataclasses.MISSING]


def bare_value(value: str) -> dict[str, str]:
    """Field metadata for an option that may be given without a value, meaning ``value``:
    ``ray: str | None = field(default=None, metadata=bare_value("default"))`` makes ``--ray`` mean
    ``--ray default`` while ``--ray ADDRESS`` still takes an address."""
    return {_BARE_KEY: value}


def _flags(name: str) -> list[str]:
    """``--long-name``; a one-letter field (``k``) also gets ``-k``."""
    long = option_name(name)
    return [f"-{name}", long] if len(name) == 1 else [long]


SHOWN = "SHOWN"
"""Name of the class attribute (``SHOWN: ClassVar[tuple[str, ...]] = ("rank", ...)``) in which a config names the
fields a researcher sets daily: only those are options in ``--help``; every other field is a setting given by key
(:mod:`cladebench.tiers`). A config that names none has every field as an option."""


def shown_options(cls: type) -> tuple[str, ...] | None:
    """The fields ``--help`` lists as options, in order: each class's own :data:`SHOWN` from the most derived down
    (the shared eval options, then the task's); None when no class of ``cls`` declares any (every field shown).
    The one home of the decision which options are shown."""
    declared = [klass.__dict__[SHOWN] for klass in cls.__mro__ if SHOWN in klass.__dict__]
    if not declared:
        return None
    return tuple(dict.fromkeys(name for names in declared for name in names))


_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<=\.)\s+(?=[A-Z(`'])")


def first_sentence(text: str) -> str:
    """The first sentence of a field's docstring, to its first semicolon: what ``--help`` shows in a line or two
    (the whole docstring, under the field, is the reference).

    Example:
        >>> first_sentence("Rank of the labels, e.g. genus. The taxa at this rank form the label set.")
        'Rank of the labels, e.g. genus.'
    """
    sentence = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
    depth = 0
    for at, char in enumerate(sentence):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            return sentence[:at] + "."
    return sentence


def _metavar(name: str) -> str:
    """An option's value as usage and help name it: its field's last word (``--prior-cell-km KM``: short, still
    telling)."""
    return name.rsplit("_", 1)[-1].upper()


def usage_line(prog: str, cls: type) -> str:
    """``PROG DATASET --out OUT [options]``: the positionals and required options, the rest in ``--help``."""
    positionals, options = [], []
    for field in dataclasses.fields(cls):
        if not field.init or field.metadata.get(_INTERNAL_KEY):
            continue
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if field.metadata.get(_POSITIONAL_KEY):
            positionals.append(f"[{field.name.upper()}]")
        elif not has_default and field.metadata.get(_OPTION_KEY):
            options.append(f"{option_name(field.name)} {_metavar(field.name)}")
        elif not has_default:
            positionals.append(field.name.upper())
    return " ".join([prog, *positionals, *options, "[options]"])


def field_default(field: dataclasses.Field) -> object:
    """A dataclass field's default value (its factory called), or ``dataclasses.MISSING`` when it has none."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def option_name(name: str) -> str:
    """The option a field is typed as: ``name_style`` -> ``--name-style``."""
    return "--" + name.replace("_", "-")


def parse_text(annotation: object, text: str, option: str) -> object:
    """``text`` as a value of a field's type: the one conversion of typed words (an option's value on the command
    line, a suite's ``--setting NAME=VALUE``). A tuple takes comma-separated items; ``none`` is None where the
    field allows it. A word that is not of the type is a usage error naming the option.

    Example:
        >>> parse_text(tuple[int, ...], "1,5", "--shots")
        (1, 5)
        >>> parse_text(int, "five", "--shots")
        Traceback (most recent call last):
        ...
        cladebench.errors.UsageError: --shots: expected an integer, got 'five'
    """
    annotation, optional = _unwrap_optional(annotation)
    if optional and text.strip().lower() in ("none", "null", ""):
        return None
    origin = get_origin(annotation)
    if origin in (tuple, list):
        item = get_args(annotation)[0] if get_args(annotation) else str
        return tuple(parse_text(item, part.strip(), option) for part in text.split(",") if part.strip())
    if origin is Literal:
        choices = get_args(annotation)
        if text not in [str(c) for c in choices]:
            raise UsageError(f"{option}: {unknown_name('value', text, map(str, choices))}")
        return type(choices[0])(text)
    if annotation is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"{option}: expected true or false, got {text!r}")
        return lowered in ("true", "1", "yes")
    if annotation in (int, float):
        try:
            return annotation(text)
        except ValueError:
            kind = "an integer" if annotation is int else "a number"
            raise UsageError(f"{option}: expected {kind}, got {text!r}") from None
    if annotation is Path:
        return Path(text).expanduser()  # a quoted ~/photos (the shell expands only a bare one)
    return text


class _Once(argparse.Action):
    """Store an option's value, refusing it given twice with different values: the last one would silently win."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) not in (None, values):
            raise argparse.ArgumentError(self, f"given twice ({getattr(namespace, self.dest)!r} and {values!r}); "
                                               "give it once")
        setattr(namespace, self.dest, values)


class _OnceFlag(argparse.BooleanOptionalAction):
    """``--flag/--no-flag``, refusing both (or either twice with another meaning) on one command line."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        value = not (option_string or "").startswith("--no-")
        if getattr(namespace, self.dest, None) not in (None, value):
            raise argparse.ArgumentError(self, f"{self.option_strings[0]} and {self.option_strings[1]} are both "
                                               "given; give one")
        super().__call__(parser, namespace, values, option_string)


def _typed(annotation: object, option: str) -> Callable[[str], object]:
    """:func:`parse_text` as argparse's ``type``: its refusal becomes argparse's, which names the option."""

    def convert(text: str) -> object:
        try:
            return parse_text(annotation, text, option)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option}: ")) from None

    convert.__name__ = getattr(annotation, "__name__", "value")  # argparse names the type in its own messages
    return convert


def add_config_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one argument per field of the dataclass ``cls`` to ``parser``.

    An option left out is absent from the parsed namespace (its default is the dataclass's, filled when the config
    is built), so :func:`config_from_args` knows which settings the user gave."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    shown = shown_options(cls)
    order = {name: at for at, name in enumerate(shown or ())}
    fields = sorted(dataclasses.fields(cls), key=lambda f: order.get(f.name, len(order)))  # stable: shown first
    for field in fields:
        if not field.init or field.metadata.get(_INTERNAL_KEY):
            continue
        hidden = shown is not None and field.name not in order and field_default(field) is not dataclasses.MISSING
        annotation, _ = _unwrap_optional(hints[field.name])
        default = field_default(field)
        has_default = default is not dataclasses.MISSING
        if not has_default:
            default = None
        help_text = first_sentence(docs.get(field.name, ""))
        # `is`, not `in`: 0 == False, and a default of 0 is worth showing.
        if has_default and not (default is None or default is False or default == ()):
            help_text += f" (default: {_show(default)})"
        option = option_name(field.name)
        # A setting of the second tier: given by key (--setting), or typed as its option by a script, never listed.
        kwargs: dict[str, Any] = {"help": argparse.SUPPRESS if hidden else help_text}
        origin = get_origin(annotation)
        if annotation is bool:
            kwargs["action"] = _OnceFlag
        elif origin is Literal:
            kwargs["type"] = _typed(annotation, option)
            kwargs["metavar"] = "{" + ",".join(map(str, get_args(annotation))) + "}"
        elif origin in (tuple, list):
            item = get_args(annotation)[0] if get_args(annotation) else str
            kwargs["nargs"] = "+"
            kwargs["type"] = _typed(item, option)
            kwargs["action"] = "extend"  # given twice, the values add up: never the last one alone
        else:
            kwargs["type"] = _typed(annotation, option)
            kwargs["metavar"] = _metavar(field.name)
        if not has_default and not field.metadata.get(_OPTION_KEY):
            kwargs.pop("metavar", None)
            parser.add_argument(field.name, **kwargs)
            continue
        if field.metadata.get(_POSITIONAL_KEY):  # optional: one value, or any number for a tuple
            kwargs.pop("metavar", None)
            kwargs.pop("action", None)
            parser.add_argument(field.name, nargs="*" if kwargs.pop("nargs", None) else "?", default=default, **kwargs)
            continue
        if not has_default:
            kwargs["required"] = True
        else:
            kwargs["default"] = argparse.SUPPRESS  # absent unless typed: the dataclass's default fills it
        kwargs.setdefault("action", _Once)
        if _BARE_KEY in field.metadata:
            kwargs.update(nargs="?", const=field.metadata[_BARE_KEY])
        parser.add_argument(*_flags(field.name), dest=field.name, **kwargs)


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def take_late_positionals(cls: type, args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Give optional positionals (``POSITIONAL`` fields) the values that came after options; returns the rest.

    argparse fills every positional from the first run of bare words, so in ``search DATASET --model M TEXT``
    the optional TEXT is already settled (empty) when TEXT arrives and is left over. Such leftovers are taken
    here, in field order, by the optional positionals still unset.
    """
    words = [w for w in extra if not w.startswith("-")]
    rest = [w for w in extra if w.startswith("-")]
    for field in dataclasses.fields(cls):
        if not words:
            break
        if field.metadata.get(_POSITIONAL_KEY) and getattr(args, field.name, None) in (None, field.default, []):
            annotation = _unwrap_optional(typing.get_type_hints(cls)[field.name])[0]
            several = get_origin(annotation) in (tuple, list)
            item = _typed((get_args(annotation) or (str,))[0], field.name)
            setattr(args, field.name, [item(w) for w in words] if several else words.pop(0))
            words = [] if several else words
    return rest + words


def config_from_args(cls: type[C], args: argparse.Namespace,
                     keyed: Mapping[str, tuple[str, object]] | None = None) -> C:
    """Build the config from parsed arguments; tuple fields get tuples, so the config stays hashable. ``keyed``:
    field -> (where it was given, its value) of the settings given by key (:mod:`cladebench.tiers`), which count
    as given exactly as the options typed: the config built does not depend on the tier. A config with a
    :data:`GIVEN` field gets the names of the settings given, in field order."""
    hints = typing.get_type_hints(cls)
    keyed = keyed or {}
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if hasattr(args, field.name):
            value = getattr(args, field.name)
            annotation, _ = _unwrap_optional(hints[field.name])
            if isinstance(value, list) and get_origin(annotation) is tuple:
                value = tuple(value)
            values[field.name] = value
        if field.name in keyed:
            origin, value = keyed[field.name]
            if field.name in values and values[field.name] != value:
                raise UsageError(f"{field.name} is given twice ({_flags(field.name)[0]} {_show(values[field.name])} "
                                 f"and {origin}); give it once")
            values[field.name] = value
    if any(f.name == GIVEN for f in dataclasses.fields(cls)):
        values[GIVEN] = tuple(name for name in values if name != GIVEN)
    try:
        return cls(**values)
    except UsageError as error:
        raise UsageError(_said_where_given(_said_as_option(str(error), cls), keyed)) from None


def _said_where_given(message: str, keyed: Mapping[str, tuple[str, object]]) -> str:
    """A refusal that starts with the option of a setting given by key (``--rerank-k must be at least 1``) led by
    where it was given as typed (``--setting rerank_k=0: --rerank-k must ...``): the same message either way, and the
    key the user wrote in it."""
    for name, (origin, _) in keyed.items():
        if message.startswith((f"{option_name(name)} ", f"{option_name(name)}:", f"{_flags(name)[0]} ")):
            return f"{origin}: {message}"
    return message


def _said_as_option(message: str, cls: type) -> str:
    """A config's refusal that starts with a field's name (``per_species must be at least 1``) said with the
    option the user typed (``--per-species must be at least 1``): a config checks its fields by name, the user
    knows the options."""
    for field in dataclasses.fields(cls):
        if field.init and field_default(field) is not dataclasses.MISSING and message.startswith(f"{field.name} "):
            return _flags(field.name)[0] + message[len(field.name):]
    return message


def config_to_dict(config: Any) -> dict[str, object]:
    """A JSON-ready dict of a config (paths as strings), for provenance records."""

    def plain(value: object) -> object:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if dataclasses.is_dataclass(value):
            return config_to_dict(value)
        return value

    return {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config)}


# Range checks of settings, named by the option a user typed: configs call these from __post_init__,
# so a value out of range is refused as a UsageError (exit 2) before anything runs.
def _number(option: str, value: object, kind: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    number = float(value)
    if math.isnan(number):
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    return number


def at_least(option: str, value: object, minimum: int) -> None:
    """Refuse an integer setting below ``minimum`` (or one that is not an integer)."""
    whole = isinstance(value, int) or (isinstance(value, Real) and math.isfinite(float(value))
                                       and float(value).is_integer())
    if isinstance(value, bool) or not whole or not isinstance(value, Real):  # an int is a Real too
        raise UsageError(f"{option} must be an integer, got {value!r}")
    if value < minimum:
        raise UsageError(f"{option} must be at least {minimum}, got {value}")


def at_most(option: str, value: int, maximum: int, why: str) -> None:
    """Refuse an integer setting above ``maximum`` (after :func:`at_least` has checked it is one); ``why`` says
    what the bound is, so the one line explains itself."""
    if value > maximum:
        raise UsageError(f"{option} must be at most {maximum:,} ({why}), got {value:,}")


def positive(option: str, value: object) -> None:
    """Refuse a number that is not finite and greater than zero."""
    number = _number(option, value, "a positive number")
    if not (math.isfinite(number) and number > 0):
        raise UsageError(f"{option} must be a positive finite number, got {value}")


def non_negative(option: str, value: object) -> None:
    """Refuse a number that is not finite and at least zero."""
    number = _number(option, value, "a number >= 0")
    if not (math.isfinite(number) and number >= 0):
        raise UsageError(f"{option} must be a finite number >= 0, got {value}")
