"""Config spaces: properties over random small spaces, checked against brute force, plus the error
messages and edge cases that strategies and replay rely on."""

import itertools
import json
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunebench.space import (
    ENUMERATION_LIMIT,
    Choice,
    ConfigError,
    Constraint,
    Flag,
    IntRange,
    Ordinal,
    PowerOfTwo,
    Space,
    parameter_from_spec,
    space_from_spec,
)

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------------------------------------
# Random small spaces and an independent reference
# ---------------------------------------------------------------------------------------------

@st.composite
def parameters(draw, name):
    kind = draw(st.sampled_from(["power_of_two", "int_range", "ordinal", "choice", "flag"]))
    if kind == "power_of_two":
        low = draw(st.integers(0, 4))
        return PowerOfTwo(name, 2 ** low, 2 ** draw(st.integers(low, low + 3)))
    if kind == "int_range":
        low = draw(st.integers(-3, 3))
        return IntRange(name, low, low + draw(st.integers(0, 4)))
    if kind == "ordinal":
        return Ordinal(name, draw(st.lists(st.integers(-5, 40), min_size=1, max_size=5, unique=True)))
    if kind == "choice":
        categories = st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", "c", "d"]))
        return Choice(name, draw(st.lists(categories, min_size=1, max_size=4, unique=True)))
    return Flag(name)


def score(parameter, value):
    """A number per value for test constraints: log2 for powers of two, the value for ints."""
    if isinstance(parameter, PowerOfTwo):
        return value.bit_length() - 1
    if isinstance(parameter, Choice):
        return parameter.values.index(value)
    return int(value)


@st.composite
def spaces(draw):
    count = draw(st.integers(1, 4))
    params = [draw(parameters(f"p{i}")) for i in range(count)]

    def total(config):
        return sum(score(parameter, config[parameter.name]) for parameter in params)

    constraint = draw(st.sampled_from([None, "budget", "parity"]))
    constraints = []
    if constraint == "budget":
        threshold = draw(st.integers(-8, 20))
        constraints.append(Constraint("budget", lambda c: total(c) <= threshold, f"sum of scores <= {threshold}"))
    elif constraint == "parity":
        constraints.append(Constraint("parity", lambda c: total(c) % 2 == 0, "sum of scores is even"))
    return Space(params, constraints, name="random")


def product_configs(space):
    return [dict(zip(space.names, values)) for values in itertools.product(*(p.values for p in space.parameters))]


def brute_force(space):
    return [c for c in product_configs(space) if all(con.predicate(c) for con in space.constraints)]


def as_key(config):
    # Types are part of the key so that a bool never passes for an int.
    return tuple((name, type(value), value) for name, value in config.items())


def steps(parameter, a, b):
    """Steps between two values, from the definitions rather than the implementation."""
    if isinstance(parameter, PowerOfTwo):
        return abs(a.bit_length() - b.bit_length())
    if isinstance(parameter, IntRange):
        return abs(a - b)
    if isinstance(parameter, Ordinal):
        ordered = sorted(parameter.values)
        return abs(ordered.index(a) - ordered.index(b))
    return int(a != b)


def assert_plain(space, config):
    assert list(config) == list(space.names)
    for parameter in space.parameters:
        value = config[parameter.name]
        assert type(value) in (int, str, bool), (parameter.name, type(value))
        assert parameter.contains(value)


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

@PROPERTY_SETTINGS
@given(spaces())
def test_enumerate_equals_brute_force(space):
    expected = brute_force(space)
    assert space.enumerate() == expected
    assert [as_key(c) for c in space.enumerate()] == [as_key(c) for c in expected]
    assert len(space) == len(expected)
    assert space.cardinality == len(product_configs(space))


@PROPERTY_SETTINGS
@given(spaces())
def test_is_valid_agrees_with_brute_force(space):
    valid = {as_key(c) for c in brute_force(space)}
    for config in product_configs(space):
        assert space.is_valid(config) == (as_key(config) in valid)
        assert (space.violations(config) == []) == (as_key(config) in valid)


@PROPERTY_SETTINGS
@given(spaces(), st.integers(0, 2**32 - 1))
def test_samples_are_valid_and_reproducible(space, seed):
    valid = {as_key(c) for c in brute_force(space)}
    if not valid:
        with pytest.raises(ConfigError, match="no valid configs"):
            space.sample(np.random.default_rng(seed), 3)
        return
    samples = space.sample(np.random.default_rng(seed), 30)
    assert len(samples) == 30
    for config in samples:
        assert as_key(config) in valid
        assert_plain(space, config)
    assert space.sample(np.random.default_rng(seed), 30) == samples


@PROPERTY_SETTINGS
@given(spaces(), st.data())
def test_unique_samples_have_no_duplicates(space, data):
    valid = brute_force(space)
    n = data.draw(st.integers(0, len(valid)))
    samples = space.sample(np.random.default_rng(n), n, unique=True)
    assert len(samples) == n
    assert len({as_key(c) for c in samples}) == n
    assert space.sample(np.random.default_rng(n), n, unique=True) == samples
    assert {as_key(c) for c in space.sample(np.random.default_rng(0), len(valid), unique=True)} == \
        {as_key(c) for c in valid}
    with pytest.raises(ConfigError, match=f"at most {len(valid)}"):
        space.sample(np.random.default_rng(0), len(valid) + 1, unique=True)


@PROPERTY_SETTINGS
@given(spaces(), st.data())
def test_neighbours_are_the_valid_single_steps_in_order(space, data):
    valid = brute_force(space)
    if not valid:
        return
    config = data.draw(st.sampled_from(valid))
    expected = []
    for parameter in space.parameters:
        for value in parameter.values:
            if steps(parameter, config[parameter.name], value) == 1:
                moved = {**config, parameter.name: value}
                if moved in valid:
                    expected.append(moved)
    neighbours = space.neighbours(config)
    assert neighbours == expected
    for neighbour in neighbours:
        assert_plain(space, neighbour)


@PROPERTY_SETTINGS
@given(spaces(), st.data())
def test_perturbed_configs_are_valid_and_within_radius(space, data):
    valid = brute_force(space)
    if not valid:
        return
    config = data.draw(st.sampled_from(valid))
    if data.draw(st.booleans()):
        radius = data.draw(st.integers(0, 3))
        radii = {name: radius for name in space.names}
    else:
        radii = data.draw(st.dictionaries(st.sampled_from(space.names), st.integers(0, 3)))
        radius = radii
    max_changes = data.draw(st.one_of(st.none(), st.integers(0, 4)))
    seed = data.draw(st.integers(0, 2**32 - 1))

    perturbed = space.perturb(config, np.random.default_rng(seed), radius, max_changes=max_changes)

    assert perturbed in valid
    assert_plain(space, perturbed)
    changed = [p for p in space.parameters if perturbed[p.name] != config[p.name]]
    assert len(changed) <= (len(space.names) if max_changes is None else max_changes)
    for parameter in changed:
        assert 1 <= steps(parameter, config[parameter.name], perturbed[parameter.name]) <= radii.get(parameter.name, 0)
    movable = {name for name, r in radii.items() if r > 0}
    one_step_moves = [next(n for n in c if c[n] != config[n]) for c in space.neighbours(config)]
    if any(name in movable for name in one_step_moves) and max_changes != 0:
        assert perturbed != config
    rerun = space.perturb(config, np.random.default_rng(seed), radius, max_changes=max_changes)
    assert rerun == perturbed


@PROPERTY_SETTINGS
@given(spaces(), st.data())
def test_perturbed_keys_are_successive_perturb_calls(space, data):
    valid = brute_force(space)
    if not valid:
        return
    config = data.draw(st.sampled_from(valid))
    radius = data.draw(st.one_of(st.integers(0, 3),
                                 st.dictionaries(st.sampled_from(space.names), st.integers(0, 3))))
    max_changes = data.draw(st.one_of(st.none(), st.integers(0, 4)))
    count = data.draw(st.integers(0, 12))
    seed = data.draw(st.integers(0, 2**32 - 1))
    one_by_one, batched = np.random.default_rng(seed), np.random.default_rng(seed)

    expected = [space.key(space.perturb(config, one_by_one, radius, max_changes=max_changes)) for _ in range(count)]

    assert space.perturbed_keys(config, batched, count, radius, max_changes=max_changes) == expected
    assert batched.integers(2**32) == one_by_one.integers(2**32)  # both streams drew the same numbers

@PROPERTY_SETTINGS
@given(spaces())
def test_encode_decode_round_trip(space):
    configs = product_configs(space)
    matrix = space.encode(configs)
    assert matrix.dtype == np.float64
    assert matrix.shape == (len(configs), space.width)
    assert len(space.feature_names) == space.width
    decoded = space.decode(matrix)
    assert [as_key(c) for c in decoded] == [as_key(c) for c in configs]
    assert space.encode([]).shape == (0, space.width)


@PROPERTY_SETTINGS
@given(spaces())
def test_key_config_round_trip(space):
    for config in product_configs(space):
        key = space.key(config)
        assert key == tuple(config[name] for name in space.names)
        assert as_key(space.config(key)) == as_key(config)


@PROPERTY_SETTINGS
@given(parameters("x"))
def test_parameter_spec_round_trip(parameter):
    spec = json.loads(json.dumps(parameter.to_spec()))
    assert parameter_from_spec(spec) == parameter
    assert parameter_from_spec(spec).values == parameter.values


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------

def test_values_of_each_type():
    assert PowerOfTwo("a", 4, 32).values == (4, 8, 16, 32)
    assert IntRange("b", -1, 2).values == (-1, 0, 1, 2)
    assert Ordinal("c", [8, 1, 2]).values == (1, 2, 8)
    assert Choice("d", ["z", 3, "a"]).values == ("z", 3, "a")
    assert Flag("e").values == (False, True)


def test_power_of_two_neighbours():
    block = PowerOfTwo("BLOCK_M", 16, 256)
    assert block.neighbours(16) == [32]
    assert block.neighbours(64) == [32, 128]
    assert block.neighbours(256) == [128]


def test_other_neighbours():
    assert IntRange("n", 2, 4).neighbours(2) == [3]
    assert Ordinal("g", [1, 2, 3, 4, 8, 16, 32]).neighbours(4) == [3, 8]
    assert Choice("c", ["a", "b", "c"]).neighbours("b") == ["a", "c"]
    assert Flag("f").neighbours(False) == [True]


@pytest.mark.parametrize("low, high", [(3, 16), (16, 24), (0, 4), (32, 16), (True, 4)])
def test_power_of_two_rejects_bad_bounds(low, high):
    with pytest.raises(ConfigError, match="allowed"):
        PowerOfTwo("BLOCK_M", low, high)


def test_bad_parameter_definitions():
    with pytest.raises(ConfigError, match="low=5 > high=4"):
        IntRange("n", 5, 4)
    with pytest.raises(ConfigError, match="distinct ints"):
        Ordinal("g", [1, 1, 2])
    with pytest.raises(ConfigError, match="distinct strs or ints"):
        Choice("c", [True, "a"])
    with pytest.raises(ConfigError, match="non-empty"):
        Choice("c", [])


def test_flag_rejects_one_and_int_parameters_reject_bools():
    assert Flag("f").contains(True) and not Flag("f").contains(1)
    for parameter in (IntRange("n", 0, 4), PowerOfTwo("p", 1, 4), Ordinal("o", [0, 1]), Choice("c", [0, 1])):
        assert parameter.contains(1) and not parameter.contains(True), parameter
    assert not IntRange("n", 0, 4).contains(1.0)
    space = Space([Flag("f"), IntRange("n", 0, 4)])
    assert not space.is_valid({"f": 1, "n": 1})
    assert not space.is_valid({"f": True, "n": True})
    with pytest.raises(ConfigError, match=r"f=1 \(int\) is not allowed; allowed: False or True"):
        space.key({"f": 1, "n": 1})
    with pytest.raises(ConfigError, match=r"n=True \(bool\) is not allowed; allowed: ints from 0 to 4"):
        space.key({"f": True, "n": True})


def test_numpy_scalars_become_python_values():
    space = Space([IntRange("n", 0, 4), Flag("f"), Choice("c", ["a", "b"])])
    key = space.key({"n": np.int64(3), "f": np.bool_(True), "c": np.str_("b")})
    assert key == (3, True, "b")
    assert [type(value) for value in key] == [int, bool, str]
    assert space.is_valid({"n": np.int32(3), "f": np.bool_(False), "c": "a"})


def test_perturb_is_uniform_over_values_in_reach():
    rng = np.random.default_rng(0)
    counts = Counter(IntRange("n", 0, 10).perturb(5, 2, rng) for _ in range(4000))
    assert set(counts) == {3, 4, 6, 7}
    assert min(counts.values()) > 850
    counts = Counter(IntRange("n", 0, 10).perturb(0, 2, rng) for _ in range(2000))
    assert set(counts) == {1, 2} and min(counts.values()) > 850
    assert all(Choice("c", ["a", "b", "c"]).perturb("a", 1, rng) != "a" for _ in range(100))
    assert IntRange("n", 0, 10).perturb(5, 0, rng) == 5
    assert PowerOfTwo("p", 8, 8).perturb(8, 3, rng) == 8
    with pytest.raises(ConfigError, match="radius -1"):
        IntRange("n", 0, 10).perturb(5, -1, rng)


def test_decode_snaps_off_grid_numbers_to_the_nearest_value():
    assert PowerOfTwo("p", 16, 256).decode([4.4]) == 16
    assert PowerOfTwo("p", 16, 256).decode([6.6]) == 128
    assert PowerOfTwo("p", 16, 256).decode([100.0]) == 256
    assert PowerOfTwo("p", 16, 256).decode([-3.0]) == 16
    assert IntRange("n", 2, 4).decode([3.4]) == 3
    assert IntRange("n", 2, 4).decode([9.0]) == 4
    assert Ordinal("g", [1, 2, 4, 8, 16, 32]).decode([11.0]) == 8
    assert Ordinal("g", [1, 2, 4, 8, 16, 32]).decode([13.0]) == 16
    assert Choice("c", ["a", "b", "c"]).decode([0.1, 0.7, 0.2]) == "b"
    assert Flag("f").decode([0.7]) is True and Flag("f").decode([0.2]) is False
    assert type(PowerOfTwo("p", 16, 256).decode(np.array([5.0]))) is int
    with pytest.raises(ConfigError, match="3 finite number"):
        Choice("c", ["a", "b", "c"]).decode([1.0])
    with pytest.raises(ConfigError, match="finite"):
        IntRange("n", 2, 4).decode([float("nan")])


def test_encoding_of_each_type():
    space = Space([PowerOfTwo("p", 16, 256), Choice("c", ["a", 7]), Flag("f"), Ordinal("o", [3, 1])])
    assert space.feature_names == ["p", "c=a", "c=7", "f", "o"]
    assert space.encode([{"p": 64, "c": 7, "f": True, "o": 3}]).tolist() == [[6.0, 0.0, 1.0, 1.0, 3.0]]


def test_unknown_parameter_kind_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"'categorical'.*power_of_two.*int_range.*ordinal.*choice.*flag"):
        parameter_from_spec({"kind": "categorical", "name": "x", "values": [1]})
    with pytest.raises(ConfigError, match=r"\['low'\].*\['name', 'low', 'high'\]"):
        parameter_from_spec({"kind": "int_range", "low": 1})


# ---------------------------------------------------------------------------------------------
# Spaces
# ---------------------------------------------------------------------------------------------

def gemm_like_space():
    return Space(
        [PowerOfTwo("BLOCK_M", 16, 256), PowerOfTwo("BLOCK_N", 16, 256), IntRange("num_stages", 2, 4)],
        [Constraint("tile", lambda c: c["BLOCK_M"] * c["BLOCK_N"] <= 128 * 128, "BLOCK_M*BLOCK_N <= 16384")],
        name="gemm",
    )


def test_errors_name_the_bad_value_and_what_is_allowed():
    space = gemm_like_space()
    good = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3}
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['BLCOK_M'\]; allowed: \['BLOCK_M', 'BLOCK_N', "):
        space.check({"BLCOK_M": 64, "BLOCK_N": 64, "num_stages": 3})
    with pytest.raises(ConfigError, match=r"missing parameter\(s\) \['num_stages'\]"):
        space.check({"BLOCK_M": 64, "BLOCK_N": 64})
    with pytest.raises(ConfigError, match=r"BLOCK_M=24 \(int\) is not allowed; allowed: powers of two from 16 to 256"):
        space.check({**good, "BLOCK_M": 24})
    with pytest.raises(ConfigError, match=r"violates constraint 'tile' \(BLOCK_M\*BLOCK_N <= 16384\)"):
        space.check({**good, "BLOCK_M": 256, "BLOCK_N": 128})
    with pytest.raises(ConfigError, match=r"parameter 'warps'; allowed: \['BLOCK_M', 'BLOCK_N', 'num_stages'\]"):
        space["warps"]
    with pytest.raises(ConfigError, match=r"BLOCK_M=24"):
        space.key({**good, "BLOCK_M": 24})
    space.check(good)
    assert space["num_stages"] == IntRange("num_stages", 2, 4)


def test_violations_and_key_do_not_confuse_constraints_with_values():
    space = gemm_like_space()
    too_big = {"BLOCK_M": 256, "BLOCK_N": 256, "num_stages": 2}
    assert space.key(too_big) == (256, 256, 2)
    assert space.violations(too_big) == ["tile"]
    assert not space.is_valid(too_big)
    assert not space.is_valid({"BLOCK_M": 24, "BLOCK_N": 16, "num_stages": 2})
    assert not space.is_valid({"BLOCK_M": 16, "BLOCK_N": 16, "num_stages": 2, "extra": 1})
    assert not space.is_valid("not a config")
    with pytest.raises(ConfigError, match="BLOCK_M=24"):
        space.violations({"BLOCK_M": 24, "BLOCK_N": 16, "num_stages": 2})
    with pytest.raises(ConfigError, match="3 values, one per parameter"):
        space.config((16, 16))
    with pytest.raises(ConfigError, match=r"num_stages=9"):
        space.config((16, 16, 9))


def test_space_definition_errors():
    with pytest.raises(ConfigError, match=r"duplicate parameter names \['a'\]"):
        Space([Flag("a"), IntRange("a", 0, 1)])
    with pytest.raises(ConfigError, match="at least one parameter"):
        Space([])


def test_sample_is_uniform_over_valid_configs():
    space = Space([IntRange("a", 0, 3), IntRange("b", 0, 3)], [Constraint("diagonal", lambda c: c["a"] == c["b"])])
    counts = Counter(c["a"] for c in space.sample(np.random.default_rng(1), 4000))
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 900
    assert space.sample(np.random.default_rng(1), 20) != space.sample(np.random.default_rng(2), 20)


def test_perturb_falls_back_to_a_valid_neighbour():
    space = Space([IntRange("x", 0, 1000)], [Constraint("near", lambda c: c["x"] in (500, 501))])
    for seed in range(5):
        assert space.perturb({"x": 500}, np.random.default_rng(seed), radius=1000) == {"x": 501}


def test_perturb_returns_a_copy_when_nothing_else_is_valid():
    space = Space([IntRange("x", 0, 9), Flag("f")], [Constraint("only", lambda c: c["x"] == 3 and c["f"])])
    config = {"x": 3, "f": True}
    perturbed = space.perturb(config, np.random.default_rng(0), radius=3)
    assert perturbed == config and perturbed is not config


def test_perturb_radius_mapping_moves_only_named_parameters():
    space = gemm_like_space()
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3}
    rng = np.random.default_rng(0)
    moved = [space.perturb(config, rng, {"num_stages": 1, "BLOCK_M": 0}) for _ in range(50)]
    assert {(c["BLOCK_M"], c["BLOCK_N"]) for c in moved} == {(64, 64)}
    assert {c["num_stages"] for c in moved} == {2, 4}
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['stages'\]"):
        space.perturb(config, rng, {"stages": 1})
    singles = [space.perturb(config, rng, 2, max_changes=1) for _ in range(50)]
    assert all(sum(c[n] != config[n] for n in space.names) == 1 for c in singles)
    with pytest.raises(ConfigError, match=r"count -1 is not allowed; allowed: an int >= 0"):
        space.perturbed_keys(config, rng, -1)


def test_restrict_keeps_only_recorded_valid_configs():
    space = gemm_like_space()
    recorded = [(32, 16, 2), (16, 16, 3), (256, 256, 4)]  # the last violates "tile"
    replay = space.restrict(recorded, "recorded")
    assert replay.enumerate() == [{"BLOCK_M": 16, "BLOCK_N": 16, "num_stages": 3},
                                  {"BLOCK_M": 32, "BLOCK_N": 16, "num_stages": 2}]
    assert [c.name for c in replay.constraints] == ["tile", "recorded"]
    assert replay.violations({"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3}) == ["recorded"]
    assert {space.key(c) for c in replay.sample(np.random.default_rng(0), 20)} <= set(recorded)
    assert len(space) == 5 * 5 * 3 - 3 * 3  # the original space is unchanged: 9 tiles are too big
    with pytest.raises(ConfigError, match="num_stages=7"):
        space.restrict([(16, 16, 7)], "recorded")


def test_restrict_a_huge_space_to_a_few_recorded_configs():
    space = Space([IntRange("x", 0, 2_999_999), Flag("f")], [Constraint("even", lambda c: c["x"] % 2 == 0)])
    recorded = [(np.int64(10), True), (4, False), (7, True), (4, True)]  # (7, True) violates "even"
    start = time.perf_counter()
    replay = space.restrict(recorded, "recorded")
    assert replay.enumerate() == [{"x": 4, "f": False}, {"x": 4, "f": True}, {"x": 10, "f": True}]
    assert len(replay) == 3
    assert {replay.key(c) for c in replay.sample(np.random.default_rng(0), 3, unique=True)} == \
        {(4, False), (4, True), (10, True)}
    assert replay.neighbours({"x": 4, "f": False}) == [{"x": 4, "f": True}]
    assert time.perf_counter() - start < 5  # walking 6 million product points would take far longer


def test_spec_round_trip():
    space = Space([PowerOfTwo("p", 16, 256), IntRange("n", -2, 2), Ordinal("o", [8, 1, 2]),
                   Choice("c", ["a", 3]), Flag("f")], [Constraint("none", lambda c: True)], name="demo")
    spec = json.loads(json.dumps(space.to_spec()))
    assert spec["parameters"][2] == {"kind": "ordinal", "name": "o", "values": [1, 2, 8]}
    rebuilt = space_from_spec(spec)
    assert rebuilt.parameters == space.parameters
    assert rebuilt.name == "demo"
    assert rebuilt.constraints == ()
    assert rebuilt.to_spec() == space.to_spec()
    with pytest.raises(ConfigError, match="'parameters'"):
        space_from_spec({"name": "demo"})


def test_large_space_samples_by_rejection_without_enumerating():
    space = Space([IntRange("x", 0, 2_999_999), Flag("f")],
                  [Constraint("multiple_of_7", lambda c: c["x"] % 7 == 0 and c["f"])])
    assert space.cardinality > ENUMERATION_LIMIT
    start = time.perf_counter()
    samples = space.sample(np.random.default_rng(0), 50, unique=True)
    assert all(c["x"] % 7 == 0 and c["f"] is True for c in samples)
    assert len({space.key(c) for c in samples}) == 50
    assert space.sample(np.random.default_rng(0), 50, unique=True) == samples
    assert space.is_valid({"x": 7, "f": True}) and not space.is_valid({"x": 8, "f": True})
    assert space.neighbours({"x": 7, "f": True}) == []
    assert time.perf_counter() - start < 5  # enumerating 6 million configs would take far longer

    few_valid = Space([IntRange("x", 0, 1999), IntRange("y", 0, 1199)], [Constraint("y_zero", lambda c: c["y"] == 0)])
    assert few_valid.cardinality > ENUMERATION_LIMIT
    # 150 draws from 2,000 configs repeat one with probability above 99% unless drawn without replacement.
    assert len({few_valid.key(c) for c in few_valid.sample(np.random.default_rng(0), 150, unique=True)}) == 150

    impossible = Space([IntRange("x", 0, 2_999_999)], [Constraint("never", lambda c: False, "nothing passes")])
    with pytest.raises(ConfigError, match=r"found 0 of 2 valid configs in 20000 random tries.*'never' \(nothing"):
        impossible.sample(np.random.default_rng(0), 2)


def test_encode_rejects_a_single_config_and_bad_matrices():
    space = gemm_like_space()
    with pytest.raises(ConfigError, match="single config"):
        space.encode({"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3})
    with pytest.raises(ConfigError, match=r"shape \(n, 3\)"):
        space.decode(np.zeros((2, 4)))
