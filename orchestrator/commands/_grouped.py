"""Typer commands whose parameters are option groups.

A command declares the groups it takes, ``selection: Selection`` (every field of the
group that carries an option) or ``limits: Annotated[Limits, take("image", timeout_s=
TimeoutOption)]`` (the fields named, and fields with this command's variant of their
option). :func:`grouped` gives Typer one parameter per field taken, with the field's
option (declared once, in ``_options.py``) and default, and calls the command with the
groups built from what Typer parsed; the fields a command does not take keep their
defaults. A field typed ``tuple[X, ...]`` is a repeatable option (Typer reads a list;
the group gets a tuple, empty when the option is not given).

So an option is one declaration (an ``Annotated`` alias in ``_options.py``) and one
field of a group (annotated with it); every command whose group takes the field has it.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

REQUIRED = inspect.Parameter.empty

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Variant:
    """A command's own spelling of a group's option: another alias (its help, its flag
    or metavar) and its default (``REQUIRED``: the option must be given)."""

    annotation: Any
    default: Any = REQUIRED


@dataclasses.dataclass(frozen=True)
class Take:
    """Which fields of a group a command offers as options, and its variants of some."""

    names: tuple[str, ...]
    variants: Mapping[str, Variant]


def take(*names: str, **variants: Any) -> Take:
    """The fields ``names`` with their own options, and each of ``variants`` with the
    option given (an alias, the field's default kept, or a :class:`Variant`)."""
    return Take(
        names=names,
        variants={
            name: value if isinstance(value, Variant) else Variant(value, _UNSET)
            for name, value in variants.items()
        },
    )


_UNSET: Any = object()  # a variant without a default of its own keeps the field's


def _is_group(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, *meta]`` -> (T, meta); anything else -> (hint, ())."""
    if typing.get_origin(hint) is Annotated:
        base, *meta = typing.get_args(hint)
        return base, tuple(meta)
    return hint, ()


def _is_option(hint: Any) -> bool:
    import typer.models

    return any(isinstance(meta, typer.models.ParameterInfo) for meta in _split(hint)[1])


def _repeated(base: Any) -> Any | None:
    """``tuple[X, ...]`` -> X (a repeatable option); anything else -> None."""
    if typing.get_origin(base) is tuple:
        args = typing.get_args(base)
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
    return None


def _field_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return REQUIRED


@dataclasses.dataclass(frozen=True)
class _Taken:
    """One field of a group as a Typer parameter."""

    field: str
    annotation: Any
    default: Any
    repeated: bool

    def parameter(self) -> inspect.Parameter:
        base, meta = _split(self.annotation)
        annotation, default = self.annotation, self.default
        if self.repeated:  # Typer reads a repeatable option as a list, None when not given
            annotation = Annotated[(list[_repeated(base)] | None, *meta)]  # type: ignore[misc]
            default = None if default is REQUIRED or default == () else list(default)
        return inspect.Parameter(
            self.field, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
        )

    def value(self, given: Any) -> Any:
        return tuple(given or ()) if self.repeated else given


def _taken(group: type, chosen: Take | None) -> list[_Taken]:
    hints = typing.get_type_hints(group, include_extras=True)
    fields = {field.name: field for field in dataclasses.fields(group)}
    if chosen is None:
        names = [name for name in fields if _is_option(hints[name])]
        variants: Mapping[str, Variant] = {}
    else:
        names, variants = list(chosen.names), chosen.variants
        names += [name for name in fields if name in variants and name not in names]
    taken = []
    for name in names:
        if name not in fields:
            raise TypeError(f"{group.__name__} has no field {name}")
        variant = variants.get(name)
        annotation = hints[name] if variant is None else variant.annotation
        default = _field_default(fields[name])
        if variant is not None and variant.default is not _UNSET:
            default = variant.default
        if not _is_option(annotation):
            raise TypeError(f"{group.__name__}.{name} carries no option")
        base = _split(hints[name])[0]
        taken.append(_Taken(name, annotation, default, _repeated(base) is not None))
    return taken


def grouped(command: F) -> F:
    """The command as Typer should see it: each group parameter spread into the options
    of the fields it takes (see the module's docstring)."""
    hints = typing.get_type_hints(command, include_extras=True)
    plain: list[inspect.Parameter] = []
    options: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[_Taken]]] = {}
    for parameter in inspect.signature(command).parameters.values():
        hint = hints.get(parameter.name, parameter.annotation)
        base, meta = _split(hint)
        if not _is_group(base):
            target = options if parameter.kind is inspect.Parameter.KEYWORD_ONLY else plain
            target.append(parameter.replace(annotation=hint))
            continue
        chosen = next((item for item in meta if isinstance(item, Take)), None)
        taken = _taken(base, chosen)
        groups[parameter.name] = (base, taken)
        options.extend(item.parameter() for item in taken)
    names = [parameter.name for parameter in (*plain, *options)]
    repeated = {name for name in names if names.count(name) > 1}
    if repeated:
        raise TypeError(f"{command.__name__}: options named twice: {sorted(repeated)}")
    group_fields = {item.field for _, taken in groups.values() for item in taken}

    def run(*args: Any, **values: Any) -> Any:
        arguments = {name: value for name, value in values.items() if name not in group_fields}
        for name, (group, taken) in groups.items():
            arguments[name] = group(
                **{item.field: item.value(values[item.field]) for item in taken}
            )
        return command(*args, **arguments)

    run.__name__ = command.__name__
    run.__qualname__ = command.__qualname__
    run.__module__ = command.__module__
    run.__doc__ = command.__doc__
    run.__signature__ = inspect.Signature([*plain, *options])  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in (*plain, *options)}
    run.__grouped__ = command  # type: ignore[attr-defined]
    return typing.cast(F, run)


def values_for(target: type, *groups: object, **given: Any) -> dict[str, Any]:
    """The keyword arguments of the dataclass ``target``: ``given``, and every other field
    from the first group with a field of its name. A field found nowhere is a mistake (a
    new field of ``target`` is given here or declared in a group), never a silent default."""
    values = dict(given)
    for field in dataclasses.fields(target):
        if field.name in values:
            continue
        holder = next((group for group in groups if hasattr(group, field.name)), None)
        if holder is None:
            raise TypeError(f"{target.__name__}.{field.name}: in no group and not given")
        values[field.name] = getattr(holder, field.name)
    return values
