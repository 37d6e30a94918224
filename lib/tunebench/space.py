"""Config spaces for kernel autotuning: typed parameters and the constraints between them.
Strategies sample, step to neighbours, perturb, enumerate, key and encode configs through a Space."""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

Value = int | str | bool
Config = Mapping[str, Value]
Key = tuple[Value, ...]

ENUMERATION_LIMIT = 2_000_000  # product points up to which valid configs are enumerated and cached
REJECTION_TRIES_PER_SAMPLE = 10_000  # random tries per requested config before rejection sampling gives up
PERTURB_ATTEMPTS = 100  # random perturbations tried before falling back to a single-step neighbour


class ConfigError(ValueError):
    """A parameter, value, config or spec that is not allowed; the message says what is allowed."""


def _plain(value: Any) -> Any:
    # Values read back from pandas or parquet arrive as numpy scalars; configs hold Python values.
    return value.item() if isinstance(value, np.generic) else value


def _as_int(value: Any) -> int | None:
    """`value` as a Python int, or None when it is not an int (a bool is not an int here)."""
    value = _plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return None


def _require_radius(radius: Any) -> int:
    checked = _as_int(radius)
    if checked is None or checked < 0:
        raise ConfigError(f"radius {radius!r} is not allowed; allowed: an int >= 0")
    return checked


def _require_count(count: Any) -> int:
    checked = _as_int(count)
    if checked is None or checked < 0:
        raise ConfigError(f"count {count!r} is not allowed; allowed: an int >= 0")
    return checked


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Parameter(ABC):
    """One tunable parameter. Every subclass has `values`, all allowed values in order (not declared
    here because Ordinal and Choice take it as a field), and defines what one step is."""

    name: str
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"parameter name {self.name!r} is not allowed; allowed: a non-empty str")

    @property
    @abstractmethod
    def _size(self) -> int:
        """How many values are allowed."""

    @abstractmethod
    def _value_at(self, index: int) -> Value:
        """The allowed value at `index` in `values`."""

    @abstractmethod
    def _index(self, value: Any) -> int | None:
        """Where `value` sits in `values`, or None when it is not allowed (wrong type included)."""

    @abstractmethod
    def _allowed(self) -> str:
        """The allowed values, in words, for error messages."""

    @abstractmethod
    def neighbours(self, value: Value) -> list[Value]:
        """Values one step from `value`, in value order."""

    @abstractmethod
    def perturb(self, value: Value, radius: int, rng: np.random.Generator) -> Value:
        """A value at most `radius` steps away, uniformly among those other than `value` itself."""

    @abstractmethod
    def encode(self, value: Value) -> list[float]:
        """`value` as `width` numbers for a model."""

    @abstractmethod
    def decode(self, vector: Sequence[float]) -> Value:
        """The allowed value nearest to an encoded `vector`."""

    @property
    def width(self) -> int:
        """How many numbers `encode` gives."""
        return 1

    @property
    def feature_names(self) -> list[str]:
        """One name per encoded number."""
        return [self.name]

    def contains(self, value: Any) -> bool:
        """Whether `value` is allowed, type included: True is not 1."""
        return self._index(value) is not None

    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description that `parameter_from_spec` turns back into this parameter."""
        spec: dict[str, Any] = {"kind": self.kind}
        for field in fields(self):
            value = getattr(self, field.name)
            spec[field.name] = list(value) if isinstance(value, tuple) else value
        return spec

    def _not_allowed(self, value: Any) -> str:
        return f"{self.name}={value!r} ({type(value).__name__}) is not allowed; allowed: {self._allowed()}"

    def _require_index(self, value: Any) -> int:
        index = self._index(value)
        if index is None:
            raise ConfigError(self._not_allowed(value))
        return index

    def _checked_vector(self, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float64)
        if array.shape != (self.width,) or not np.isfinite(array).all():
            raise ConfigError(f"{self.name}: cannot decode {vector!r}; allowed: {self.width} finite number(s)")
        return array


class _Ordered(Parameter):
    """A parameter whose values lie on a line: one step moves to an adjacent value."""

    def neighbours(self, value: Value) -> list[Value]:
        index = self._require_index(value)
        return [self._value_at(i) for i in (index - 1, index + 1) if 0 <= i < self._size]

    def perturb(self, value: Value, radius: int, rng: np.random.Generator) -> Value:
        index = self._require_index(value)
        radius = _require_radius(radius)
        low, high = max(0, index - radius), min(self._size - 1, index + radius)
        if low == high:
            return self._value_at(index)
        # Draw among the high - low values in reach other than `index`, then skip over it.
        drawn = int(rng.integers(low, high))
        return self._value_at(drawn + 1 if drawn >= index else drawn)

    def _nearest_index(self, position: float) -> int:
        return min(max(int(round(float(position))), 0), self._size - 1)


@dataclass(frozen=True)
class PowerOfTwo(_Ordered):
    """Powers of two from `low` to `high`; a step doubles or halves; encoded as log2."""

    low: int
    high: int
    kind: ClassVar[str] = "power_of_two"

    def __post_init__(self) -> None:
        super().__post_init__()
        for bound in ("low", "high"):
            value = _as_int(getattr(self, bound))
            if value is None or value < 1 or value & (value - 1):
                raise ConfigError(f"PowerOfTwo {self.name!r}: {bound}={getattr(self, bound)!r} is not allowed; "
                                  "allowed: a power of two (1, 2, 4, 8, ...)")
            object.__setattr__(self, bound, value)
        if self.low > self.high:
            raise ConfigError(f"PowerOfTwo {self.name!r}: low={self.low} > high={self.high}; allowed: low <= high")

    @cached_property
    def values(self) -> tuple[int, ...]:
        return tuple(self.low << i for i in range(self._size))

    @property
    def _size(self) -> int:
        return self.high.bit_length() - self.low.bit_length() + 1

    def _value_at(self, index: int) -> int:
        return self.low << index

    def _index(self, value: Any) -> int | None:
        number = _as_int(value)
        if number is None or not self.low <= number <= self.high or number & (number - 1):
            return None
        return number.bit_length() - self.low.bit_length()

    def _allowed(self) -> str:
        return f"powers of two from {self.low} to {self.high}"

    def encode(self, value: Value) -> list[float]:
        return [float(self._require_index(value) + self.low.bit_length() - 1)]

    def decode(self, vector: Sequence[float]) -> int:
        log2 = self._checked_vector(vector)[0]
        return self._value_at(self._nearest_index(log2 - (self.low.bit_length() - 1)))


@dataclass(frozen=True)
class IntRange(_Ordered):
    """Every int from `low` to `high` inclusive; a step is +-1; encoded as the value."""

    low: int
    high: int
    kind: ClassVar[str] = "int_range"

    def __post_init__(self) -> None:
        super().__post_init__()
        for bound in ("low", "high"):
            value = _as_int(getattr(self, bound))
            if value is None:
                raise ConfigError(f"IntRange {self.name!r}: {bound}={getattr(self, bound)!r} is not allowed; "
                                  "allowed: an int")
            object.__setattr__(self, bound, value)
        if self.low > self.high:
            raise ConfigError(f"IntRange {self.name!r}: low={self.low} > high={self.high}; allowed: low <= high")

    @cached_property
    def values(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1))

    @property
    def _size(self) -> int:
        return self.high - self.low + 1

    def _value_at(self, index: int) -> int:
        return self.low + index

    def _index(self, value: Any) -> int | None:
        number = _as_int(value)
        if number is None or not self.low <= number <= self.high:
            return None
        return number - self.low

    def _allowed(self) -> str:
        return f"ints from {self.low} to {self.high}"

    def encode(self, value: Value) -> list[float]:
        return [float(self._value_at(self._require_index(value)))]

    def decode(self, vector: Sequence[float]) -> int:
        return self._value_at(self._nearest_index(self._checked_vector(vector)[0] - self.low))


@dataclass(frozen=True)
class Ordinal(_Ordered):
    """Ordered ints such as [1, 2, 3, 4, 8, 16, 32], kept sorted; a step moves to an adjacent value;
    encoded as the value."""

    values: tuple[int, ...]
    kind: ClassVar[str] = "ordinal"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.values, (str, bytes, Mapping)) or not isinstance(self.values, Iterable):
            raise ConfigError(f"Ordinal {self.name!r}: values={self.values!r} is not allowed; "
                              "allowed: a non-empty sequence of distinct ints")
        numbers = [_as_int(value) for value in self.values]
        if not numbers or None in numbers or len(set(numbers)) != len(numbers):
            raise ConfigError(f"Ordinal {self.name!r}: values={self.values!r} is not allowed; "
                              "allowed: a non-empty sequence of distinct ints")
        object.__setattr__(self, "values", tuple(sorted(numbers)))

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {value: index for index, value in enumerate(self.values)}

    @property
    def _size(self) -> int:
        return len(self.values)

    def _value_at(self, index: int) -> int:
        return self.values[index]

    def _index(self, value: Any) -> int | None:
        number = _as_int(value)
        return None if number is None else self._positions.get(number)

    def _allowed(self) -> str:
        return f"one of {list(self.values)}"

    def encode(self, value: Value) -> list[float]:
        return [float(self._value_at(self._require_index(value)))]

    def decode(self, vector: Sequence[float]) -> int:
        target = self._checked_vector(vector)[0]
        return min(self.values, key=lambda value: abs(value - target))


@dataclass(frozen=True)
class Choice(Parameter):
    """Unordered categories (strs or ints); every other value is one step away; encoded one-hot."""

    values: tuple[int | str, ...]
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        super().__post_init__()
        allowed = "a non-empty sequence of distinct strs or ints (not bools)"
        if isinstance(self.values, (str, bytes, Mapping)) or not isinstance(self.values, Iterable):
            raise ConfigError(f"Choice {self.name!r}: values={self.values!r} is not allowed; allowed: {allowed}")
        values = tuple(_plain(value) for value in self.values)
        if (not values or not all(self._is_category(value) for value in values)
                or len(set(values)) != len(values)):
            raise ConfigError(f"Choice {self.name!r}: values={self.values!r} is not allowed; allowed: {allowed}")
        object.__setattr__(self, "values", values)

    @staticmethod
    def _is_category(value: Any) -> bool:
        # A float or bool equal to an int category would match it in a dict; only strs and ints count.
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))

    @cached_property
    def _positions(self) -> dict[int | str, int]:
        return {value: index for index, value in enumerate(self.values)}

    @property
    def _size(self) -> int:
        return len(self.values)

    def _value_at(self, index: int) -> int | str:
        return self.values[index]

    def _index(self, value: Any) -> int | None:
        value = _plain(value)
        return self._positions.get(value) if self._is_category(value) else None

    def _allowed(self) -> str:
        return f"one of {list(self.values)}"

    def neighbours(self, value: Value) -> list[Value]:
        index = self._require_index(value)
        return [other for position, other in enumerate(self.values) if position != index]

    def perturb(self, value: Value, radius: int, rng: np.random.Generator) -> Value:
        index = self._require_index(value)
        if _require_radius(radius) == 0 or self._size == 1:
            return self._value_at(index)
        drawn = int(rng.integers(self._size - 1))
        return self._value_at(drawn + 1 if drawn >= index else drawn)

    @property
    def width(self) -> int:
        return self._size

    @property
    def feature_names(self) -> list[str]:
        return [f"{self.name}={value}" for value in self.values]

    def encode(self, value: Value) -> list[float]:
        one_hot = [0.0] * self._size
        one_hot[self._require_index(value)] = 1.0
        return one_hot

    def decode(self, vector: Sequence[float]) -> int | str:
        return self._value_at(int(np.argmax(self._checked_vector(vector))))


@dataclass(frozen=True)
class Flag(_Ordered):
    """An on/off switch: False or True (bools only); a step flips it; encoded as 0 or 1."""

    kind: ClassVar[str] = "flag"

    @property
    def values(self) -> tuple[bool, bool]:
        return (False, True)

    @property
    def _size(self) -> int:
        return 2

    def _value_at(self, index: int) -> bool:
        return bool(index)

    def _index(self, value: Any) -> int | None:
        value = _plain(value)
        return int(value) if isinstance(value, bool) else None

    def _allowed(self) -> str:
        return "False or True (bools only)"

    def encode(self, value: Value) -> list[float]:
        return [float(self._require_index(value))]

    def decode(self, vector: Sequence[float]) -> bool:
        return bool(self._checked_vector(vector)[0] >= 0.5)


_PARAMETER_KINDS: dict[str, type[Parameter]] = {
    kind.kind: kind for kind in (PowerOfTwo, IntRange, Ordinal, Choice, Flag)
}


def parameter_from_spec(spec: Mapping[str, Any]) -> Parameter:
    """The parameter that `Parameter.to_spec` described."""
    kind = spec.get("kind") if isinstance(spec, Mapping) else None
    parameter_class = _PARAMETER_KINDS.get(kind) if isinstance(kind, str) else None
    if parameter_class is None:
        raise ConfigError(f"parameter spec {spec!r} has kind {kind!r}; allowed kinds: {list(_PARAMETER_KINDS)}")
    expected = [field.name for field in fields(parameter_class)]
    given = [field for field in spec if field != "kind"]
    if sorted(given) != sorted(expected):
        raise ConfigError(f"{kind} spec has fields {given}; allowed: exactly {expected} besides 'kind'")
    return parameter_class(**{field: spec[field] for field in expected})


# ---------------------------------------------------------------------------------------------
# Constraints and spaces
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Constraint:
    """A rule over whole configs; a config is valid when every constraint's predicate returns True."""

    name: str
    predicate: Callable[[Config], bool]
    description: str = ""

    def __str__(self) -> str:
        return f"{self.name!r} ({self.description})" if self.description else repr(self.name)


class Space:
    """The product of some parameters, cut down by constraints. Immutable, so the valid configs are
    enumerated once, lazily, and reused; over ENUMERATION_LIMIT product points (unless restricted to
    recorded keys) validity is computed per config and sampling is by rejection."""

    def __init__(self, parameters: Sequence[Parameter], constraints: Sequence[Constraint] = (), name: str = ""):
        self.parameters: tuple[Parameter, ...] = tuple(parameters)
        self.constraints: tuple[Constraint, ...] = tuple(constraints)
        self.name = name
        if not self.parameters:
            raise ConfigError("a space with no parameters is not allowed; allowed: at least one parameter")
        for parameter in self.parameters:
            if not isinstance(parameter, Parameter):
                raise ConfigError(f"{parameter!r} is not allowed as a parameter; "
                                  f"allowed: instances of {[kind.__name__ for kind in _PARAMETER_KINDS.values()]}")
        for constraint in self.constraints:
            if not isinstance(constraint, Constraint):
                raise ConfigError(f"{constraint!r} is not allowed as a constraint; allowed: Constraint instances")
        names = [parameter.name for parameter in self.parameters]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"duplicate parameter names {duplicates}; allowed: each name once")
        self._names = tuple(names)
        self._position = {name: position for position, name in enumerate(names)}
        self._enumerable = self.cardinality <= ENUMERATION_LIMIT
        # Set by `restrict`: the only keys that can be valid, so enumeration need not walk the product.
        self._candidate_keys: frozenset[Key] | None = None
        self._valid_keys: tuple[Key, ...] | None = None
        self._valid_key_set: frozenset[Key] = frozenset()

    def __repr__(self) -> str:
        return (f"Space({self.name!r}, parameters={list(self._names)}, "
                f"constraints={[constraint.name for constraint in self.constraints]})")

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in parameter order; keys follow it."""
        return self._names

    def __getitem__(self, name: str) -> Parameter:
        position = self._position.get(name)
        if position is None:
            raise ConfigError(f"unknown parameter {name!r}; allowed: {list(self._names)}")
        return self.parameters[position]

    def __len__(self) -> int:
        """The number of valid configs."""
        return len(self._enumerated_keys())

    @cached_property
    def cardinality(self) -> int:
        """The size of the product of parameter values, before constraints."""
        return math.prod(parameter._size for parameter in self.parameters)

    # Keys, checks and validity ---------------------------------------------------------------

    def key(self, config: Config) -> Key:
        """`config`'s values in parameter order; checks names and values, not constraints."""
        key = self._try_key(config)
        if key is None:
            raise ConfigError(self._describe_problems(config, self._config_problems(config)))
        return key

    def config(self, key: Iterable[Value]) -> dict[str, Value]:
        """The config whose key is `key`; checks its length and values."""
        return self._to_config(self._checked_key(key))

    def check(self, config: Config) -> None:
        """Raise a ConfigError naming every problem: unknown or missing names, values not allowed,
        violated constraints."""
        problems = self._config_problems(config)
        if not problems:
            problems = [f"violates constraint {constraint}" for constraint in self._violated(self.key(config))]
        if problems:
            raise ConfigError(self._describe_problems(config, problems))

    def violations(self, config: Config) -> list[str]:
        """Names of the constraints `config` violates; its names and values must be allowed."""
        return [constraint.name for constraint in self._violated(self.key(config))]

    def is_valid(self, config: Config) -> bool:
        """Whether `config` has allowed names and values and meets every constraint. Raises nothing
        for any config; a predicate that raises is a bug in the predicate and propagates."""
        key = self._try_key(config) if isinstance(config, Mapping) else None
        return key is not None and self._is_valid_key(key)

    # Moves -----------------------------------------------------------------------------------

    def sample(self, rng: np.random.Generator, n: int, *, unique: bool = False) -> list[dict[str, Value]]:
        """`n` configs drawn uniformly from the valid ones; with `unique`, without replacement."""
        n = _require_count(n)
        if n == 0:
            return []
        if not self._enumerable:
            return self._rejection_sample(rng, n, unique)
        keys = self._enumerated_keys()
        if unique and n > len(keys):
            raise ConfigError(f"cannot draw {n} distinct configs; allowed: at most {len(keys)}, "
                              "the number of valid configs")
        if not keys:
            raise ConfigError(f"space {self.name!r} has no valid configs to sample; "
                              f"constraints: {', '.join(map(str, self.constraints))}")
        drawn = rng.choice(len(keys), size=n, replace=False) if unique else rng.integers(len(keys), size=n)
        return [self._to_config(keys[index]) for index in drawn.tolist()]

    def neighbours(self, config: Config) -> list[dict[str, Value]]:
        """Every valid config one parameter-level step from `config`, in parameter order then value order."""
        key = self.key(config)
        return [self._to_config(candidate) for candidate in self._single_steps(key, range(len(key)))]

    def perturb(self, config: Config, rng: np.random.Generator, radius: int | Mapping[str, int] = 1, *,
                max_changes: int | None = None) -> dict[str, Value]:
        """A valid config that differs from `config` when one can be found: between 1 and `max_changes`
        (default: all) randomly chosen parameters each move within their radius. A mapping of radii
        leaves parameters it omits, and those with radius 0, unchanged. After PERTURB_ATTEMPTS invalid
        tries, a random valid single-step neighbour; failing that, a copy of `config`."""
        return self._to_config(self.perturbed_keys(config, rng, 1, radius, max_changes=max_changes)[0])

    def perturbed_keys(self, config: Config, rng: np.random.Generator, count: int,
                       radius: int | Mapping[str, int] = 1, *, max_changes: int | None = None) -> list[Key]:
        """The keys of `count` successive `perturb` calls with the same arguments (the same draws from `rng`, the
        same keys), with `config`, the radii and `max_changes` checked once rather than on every move."""
        key = self.key(config)
        radii = self._radii(radius)
        movable = [position for position, parameter in enumerate(self.parameters)
                   if radii[position] > 0 and parameter._size > 1]
        limit = len(movable) if max_changes is None else min(_require_count(max_changes), len(movable))
        return [self._perturbed_key(key, rng, radii, movable, limit) for _ in range(_require_count(count))]

    def _perturbed_key(self, key: Key, rng: np.random.Generator, radii: list[int], movable: list[int],
                       limit: int) -> Key:
        if limit == 0:
            return key
        for _ in range(PERTURB_ATTEMPTS):
            count = int(rng.integers(1, limit + 1))
            candidate = list(key)
            for position in rng.choice(movable, size=count, replace=False).tolist():
                candidate[position] = self.parameters[position].perturb(key[position], radii[position], rng)
            # Every chosen parameter has another value in reach, so `moved` differs from `key`.
            moved = tuple(candidate)
            if self._is_valid_key(moved):
                return moved
        fallback = self._single_steps(key, movable)
        if fallback:
            return fallback[int(rng.integers(len(fallback)))]
        return key

    def enumerate(self) -> list[dict[str, Value]]:
        """Every valid config, in itertools.product order over the parameters' values."""
        return [self._to_config(key) for key in self._enumerated_keys()]

    def restrict(self, keys: Iterable[Key], name: str) -> Space:
        """This space cut down to the configs with the given keys (those that are also valid here),
        by one more constraint called `name`: replay can only measure what was recorded."""
        recorded = frozenset(self._checked_key(key) for key in keys)
        names = self._names

        def is_recorded(config: Config) -> bool:
            return tuple(config[parameter] for parameter in names) in recorded

        constraint = Constraint(name, is_recorded, f"one of {len(recorded)} recorded configs")
        restricted = Space(self.parameters, self.constraints + (constraint,), name=self.name)
        restricted._candidate_keys = recorded
        restricted._enumerable = True  # the recorded keys are in memory already, however large the product
        return restricted

    # Encoding for models ---------------------------------------------------------------------

    @cached_property
    def width(self) -> int:
        """How many numbers encode one config (the dispatcher asks several times a call: computed once)."""
        return sum(parameter.width for parameter in self.parameters)

    @property
    def feature_names(self) -> list[str]:
        """One name per encoded column."""
        return [feature for parameter in self.parameters for feature in parameter.feature_names]

    def encode(self, configs: Sequence[Config]) -> np.ndarray:
        """An (n, width) float64 matrix, one row per config, parameters in order."""
        if isinstance(configs, Mapping):
            raise ConfigError("encode takes a sequence of configs; got a single config, wrap it in a list")
        matrix = np.empty((len(configs), self.width), dtype=np.float64)
        for row, config in enumerate(configs):
            key = self.key(config)
            matrix[row] = [number for parameter, value in zip(self.parameters, key)
                           for number in parameter.encode(value)]
        return matrix

    def decode(self, matrix: np.ndarray) -> list[dict[str, Value]]:
        """The config nearest to each row, parameter by parameter. A decoded config may violate the
        constraints: check it with `is_valid`."""
        array = np.asarray(matrix, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != self.width:
            raise ConfigError(f"cannot decode an array of shape {array.shape}; allowed: shape (n, {self.width})")
        bounds = np.cumsum([0] + [parameter.width for parameter in self.parameters]).tolist()
        return [{parameter.name: parameter.decode(row[bounds[i]:bounds[i + 1]])
                 for i, parameter in enumerate(self.parameters)} for row in array]

    # Specs -----------------------------------------------------------------------------------

    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description of the name and parameters; constraints are code and are left out."""
        return {"name": self.name, "parameters": [parameter.to_spec() for parameter in self.parameters]}

    # Internals -------------------------------------------------------------------------------

    def _to_config(self, key: Key) -> dict[str, Value]:
        return dict(zip(self._names, key))

    def _try_key(self, config: Config) -> Key | None:
        """The key of `config`, or None when a name or value is not allowed: the fast path of `key`."""
        if len(config) != len(self._names):
            return None
        values = []
        for parameter in self.parameters:
            value = config.get(parameter.name)
            if value is None or parameter._index(value) is None:
                return None
            values.append(_plain(value))
        return tuple(values)

    def _checked_key(self, key: Iterable[Value]) -> Key:
        values = None if isinstance(key, (str, bytes, Mapping)) or not isinstance(key, Iterable) else tuple(key)
        if values is None or len(values) != len(self._names):
            raise ConfigError(f"key {key!r} is not allowed; allowed: a tuple of {len(self._names)} values, "
                              f"one per parameter {list(self._names)}")
        problems = [parameter._not_allowed(value) for parameter, value in zip(self.parameters, values)
                    if not parameter.contains(value)]
        if problems:
            raise ConfigError(f"key {key!r} is not allowed: {'; '.join(problems)}")
        return tuple(_plain(value) for value in values)

    def _config_problems(self, config: Config) -> list[str]:
        if not isinstance(config, Mapping):
            return [f"a config is a mapping from parameter name to value; got {type(config).__name__}"]
        problems = []
        unknown = [name for name in config if name not in self._position]
        if unknown:
            problems.append(f"unknown parameter(s) {unknown}; allowed: {list(self._names)}")
        missing = [name for name in self._names if name not in config]
        if missing:
            problems.append(f"missing parameter(s) {missing}")
        problems += [parameter._not_allowed(config[parameter.name]) for parameter in self.parameters
                     if parameter.name in config and not parameter.contains(config[parameter.name])]
        return problems

    def _describe_problems(self, config: Any, problems: list[str]) -> str:
        return f"config {config!r} is not allowed in space {self.name!r}: {'; '.join(problems)}"

    def _violated(self, key: Key) -> list[Constraint]:
        config = self._to_config(key)
        return [constraint for constraint in self.constraints if not constraint.predicate(config)]

    def _satisfies(self, key: Key) -> bool:
        if not self.constraints:
            return True
        config = self._to_config(key)
        return all(constraint.predicate(config) for constraint in self.constraints)

    def _enumerated_keys(self) -> tuple[Key, ...]:
        if self._valid_keys is None:
            if self._candidate_keys is None:
                candidates: Iterable[Key] = itertools.product(*(parameter.values for parameter in self.parameters))
            else:
                candidates = sorted(self._candidate_keys, key=self._product_position)
            self._valid_keys = tuple(key for key in candidates if self._satisfies(key))
            self._valid_key_set = frozenset(self._valid_keys)
        return self._valid_keys

    def _product_position(self, key: Key) -> tuple[int, ...]:
        """Sorting keys by this puts them in itertools.product order."""
        return tuple(parameter._index(value) for parameter, value in zip(self.parameters, key))

    def _is_valid_key(self, key: Key) -> bool:
        if self._enumerable:
            self._enumerated_keys()
            return key in self._valid_key_set
        return self._satisfies(key)

    def _single_steps(self, key: Key, positions: Iterable[int]) -> list[Key]:
        """Valid keys one parameter-level step from `key` at one of `positions`."""
        steps = []
        for position in positions:
            for value in self.parameters[position].neighbours(key[position]):
                candidate = key[:position] + (value,) + key[position + 1:]
                if self._is_valid_key(candidate):
                    steps.append(candidate)
        return steps

    def _radii(self, radius: int | Mapping[str, int]) -> list[int]:
        if isinstance(radius, Mapping):
            unknown = [name for name in radius if name not in self._position]
            if unknown:
                raise ConfigError(f"radius for unknown parameter(s) {unknown}; allowed: {list(self._names)}")
            return [_require_radius(radius.get(name, 0)) for name in self._names]
        return [_require_radius(radius)] * len(self._names)

    def _rejection_sample(self, rng: np.random.Generator, n: int, unique: bool) -> list[dict[str, Value]]:
        sizes = np.array([parameter._size for parameter in self.parameters], dtype=np.int64)
        tries = REJECTION_TRIES_PER_SAMPLE * n
        found: list[Key] = []
        seen: set[Key] = set()
        tries_left = tries
        while len(found) < n and tries_left > 0:
            batch = min(tries_left, max(256, 4 * (n - len(found))))
            tries_left -= batch
            for indices in rng.integers(0, sizes, size=(batch, len(sizes))).tolist():
                key = tuple(parameter._value_at(index) for parameter, index in zip(self.parameters, indices))
                if (unique and key in seen) or not self._satisfies(key):
                    continue
                found.append(key)
                seen.add(key)
                if len(found) == n:
                    break
        if len(found) < n:
            raise ConfigError(f"rejection sampling found {len(found)} of {n} valid configs in {tries} random tries "
                              f"over {self.cardinality} combinations; constraints: "
                              f"{', '.join(map(str, self.constraints))}")
        return [self._to_config(key) for key in found]


def space_from_spec(spec: Mapping[str, Any]) -> Space:
    """The unconstrained space that `Space.to_spec` described."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("parameters"), list) \
            or not set(spec) <= {"name", "parameters"}:
        raise ConfigError(f"space spec {spec!r} is not allowed; allowed: a mapping with 'parameters' (a list of "
                          "parameter specs) and optionally 'name'")
    return Space([parameter_from_spec(parameter) for parameter in spec["parameters"]], name=spec.get("name", ""))
