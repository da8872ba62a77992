"""Compile options: the ``options=`` dict of ``Context.compile``, checked and merged with the
JSON file its ``"option_json"`` names.

``options={"option_json": "opts.json", "strict": True}`` reads ``opts.json`` (a JSON object of
the same options) and merges it with the other keys of the dict: **a key given in the dict
overrides the file's**, as a command line overrides a configuration file. Every key, from the
dict or from the file, must be a known option; a file that cannot be read, is not JSON, is not a
JSON object, repeats a key, or itself holds ``"option_json"`` is an error naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mncore_compiler.request import OPTIONS

__all__ = ["OPTION_JSON", "resolve_compile_options", "read_option_json"]

#: The option naming a JSON file of further options.
OPTION_JSON = "option_json"


def resolve_compile_options(options: Mapping[str, Any] | None,
                            known: Mapping[str, str]) -> dict[str, Any]:
    """Return the effective compile options: ``options`` merged over its ``"option_json"`` file.

    Parameters
    ----------
    options : dict or None
        What the caller passed as ``options=``; not modified.
    known : dict of str to str
        Every option understood, with a description of what it accepts (for error messages);
        it includes ``"option_json"``.

    Returns
    -------
    dict
        The file's options updated with the dict's, without ``"option_json"`` itself (the
        file's content is what the program records, so editing the file is a new setting).

    Raises
    ------
    TypeError
        When ``options`` is not a dict with str keys, ``"option_json"`` is not a path, or an
        option's value has the wrong type (e.g. ``strict`` not a bool).
    ValueError
        For an unknown key (in the dict or in the file, naming which), an unusable file
        (naming its path), or a value outside the option's choices.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"Compile options must be a dict of option name -> value, not "
                        f"{type(options).__name__}")
    given = dict(options)
    for key in given:
        if not isinstance(key, str):
            raise TypeError(f"Compile option names must be str, not {type(key).__name__} "
                            f"({key!r})")
    _check_known(given, known, "")
    resolved: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if OPTION_JSON in given:
        path = _option_path(given.pop(OPTION_JSON))
        from_file = read_option_json(path)
        where = f" in option_json file {str(path)!r}"
        if OPTION_JSON in from_file:
            raise ValueError(f"{OPTION_JSON!r}{where} names another file; option files do "
                             "not nest: merge the two files, or name one in the dict")
        _check_known(from_file, known, where)
        resolved.update(from_file)
        sources.update(dict.fromkeys(from_file, where))
    resolved.update(given)
    sources.update(dict.fromkeys(given, ""))
    for key, value in resolved.items():
        _check_value(key, value, sources[key])
    return resolved


def read_option_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON file holding one object of compile options.

    Raises
    ------
    ValueError
        Naming the path, when the file is missing or unreadable, not UTF-8 JSON, not a JSON
        object, or repeats a key.
    """
    where = f"option_json file {str(path)!r}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"The {where} does not exist (relative paths are taken from the "
                         f"current directory, {os.getcwd()!r})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"The {where} cannot be read: {exc}") from exc
    try:
        value = json.loads(text, object_pairs_hook=_no_repeated_keys)
    except json.JSONDecodeError as exc:
        raise ValueError(f"The {where} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}") from None
    except _RepeatedKey as exc:
        raise ValueError(f"The {where} gives option {exc.args[0]!r} more than once") from None
    except RecursionError:
        raise ValueError(f"The {where} is nested too deeply to be an object of compile "
                         "options") from None
    if not isinstance(value, dict):
        raise ValueError(f"The {where} must hold a JSON object of options, e.g. "
                         f'{{"float_dtype": "mixed"}}, not a JSON {type(value).__name__}')
    return value


class _RepeatedKey(Exception):
    pass


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RepeatedKey(key)
        result[key] = value
    return result


def _option_path(value: object) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not str(value):
        raise TypeError(f"Compile option {OPTION_JSON!r} must be the path of a JSON file "
                        f"(a non-empty str or os.PathLike), not {value!r}")
    return Path(os.fspath(value)).expanduser()


def _check_known(options: Mapping[str, Any], known: Mapping[str, str], where: str) -> None:
    unknown = sorted(set(options) - set(known))
    if unknown:
        listing = "; ".join(f"{k}: {v}" for k, v in known.items())
        raise ValueError(f"Unknown compile option(s) {unknown}{where}; known options are "
                         f"{listing}")


def _check_value(key: str, value: object, where: str) -> None:
    """The option's own check (declared once, in :data:`mncore_compiler.request.OPTIONS`),
    with ``where`` naming the file a value came from (or "")."""
    option = OPTIONS.get(key)
    wanted = option.check(value) if option is not None else None
    if wanted is not None:
        kind = TypeError if wanted == "a bool" else ValueError
        raise kind(f"Compile option {key!r}{where} must be {wanted}, not {value!r}")
