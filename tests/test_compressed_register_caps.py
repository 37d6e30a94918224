"""The register caps' summary of the recorded H100 sweep: each cap beside its uncapped twin, and fastest configs that
only get faster as caps join."""

import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))
import compressed_register_caps  # noqa: E402
from tunebench.kernels.compressed_matmul.reconstruct import REGISTER_CAPS  # noqa: E402
from tunebench.measure.dataset import load_dataset  # noqa: E402

DATASET = load_dataset(REPOSITORY / compressed_register_caps.DATASET)


def test_each_cap_is_put_beside_the_same_config_uncapped():
    table = compressed_register_caps.against_uncapped(compressed_register_caps.in_kernel_rows(DATASET))
    assert set(table.cap) == set(REGISTER_CAPS[1:]) and set(table.batch) == {"M <= 16", "M >= 64"}
    # 84 direct_palette split tiles at 6 batches and 2 projections, half of the batches in each range
    direct = table[(table.pipeline == "direct_palette") & (table.against == "none")]
    assert set(direct["configs x shapes"]) == {84 * 6}
    assert ((table.P10 <= table["median ratio"]) & (table["median ratio"] <= table.P90)).all()


def test_the_fastest_config_only_gets_faster_as_caps_join():
    table = compressed_register_caps.fastest_as_caps_join(DATASET)
    assert len(table) == 12
    columns = [f"up to {cap}, us" for cap in REGISTER_CAPS]
    assert (table[columns].diff(axis=1).iloc[:, 1:] <= 0).all().all()
    # stop 93: at gate, batch 1, the cap took the fastest config from 84.2 to 80.2 us
    gate = table[(table.projection == "gate, up") & (table.batch == 1)].iloc[0]
    assert gate[columns[1]] < gate[columns[0]]
