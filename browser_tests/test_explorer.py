"""The sharding explorer on explorer.html: its presets against the table the build checked, bad
input refused on its own field, a shared address, the keyboard, and legibility."""

from __future__ import annotations

import pytest
from survey import contrast

PAGE = "explorer.html"
FIELDS = ["preset", "mesh", "types", "op", "param", "chip", "array0", "array1"]


def open_explorer(context, site_url, fragment=""):
    tab = context.new_page()
    tab.goto(f"{site_url}{PAGE}{fragment}", wait_until="load")
    tab.wait_for_selector("#spmd-explorer .planner-status:not(:empty)")
    return tab


@pytest.mark.parametrize("preset", [1, 3, 5, 14, 16, 21, 24])
def test_a_preset_shows_what_the_build_checked(context, site_url, preset):
    tab = open_explorer(context, site_url)
    tab.select_option("#explorer-preset", str(preset))
    answer = tab.evaluate(f"spmdExplorer.explain(spmdExplorer.presets[{preset}].question)")
    name = tab.evaluate(f"spmdExplorer.presets[{preset}].name")
    status = tab.locator("#spmd-explorer .planner-status").text_content()
    # The build's table lists the same preset with the same answer, checked against XLA.
    row = tab.locator("table.explorer-presets tbody tr").filter(
        has=tab.get_by_role("link", name=name, exact=True)
    )
    assert row.count() == 1, name
    if answer["refused"]:
        assert status.startswith("JAX refuses: ShardingTypeError"), status
        assert "Fix:" in status
        assert row.locator("td").nth(2).text_content().startswith("refused")
        return
    assert answer["result"]["spec_text"] in status, status
    assert row.locator("td").nth(2).text_content().startswith(answer["result"]["spec_text"])
    shown = tab.locator("#spmd-explorer .explorer-results tbody tr")
    if not answer["collectives"]:
        assert shown.count() == 1 and "none" in shown.text_content()
    else:
        kinds = [shown.nth(i).locator("td").first.text_content() for i in range(shown.count())]
        assert kinds == [c["kind"] for c in answer["collectives"]]
    pictures = tab.locator("#spmd-explorer svg[role='img']")
    assert pictures.count() == len(answer["inputs"]) + 1
    assert "device" in pictures.first.get_attribute("aria-label")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mesh", "x=2, y=9", "axis 'y' has size 9: give a whole number from 1 to 8"),
        ("array0", "16, 30 ; x, y", "pad it to a multiple of 4"),
        ("array0", "16, 32 ; x, z", "the spec names 'z', which the mesh has not"),
        ("mesh", "x:2", 'cannot read "x:2": write each axis as name=size'),
    ],
)
def test_bad_input_is_refused_on_its_field(context, site_url, field, value, message):
    tab = open_explorer(context, site_url)
    tab.fill(f"#explorer-{field}", value)
    problem = tab.locator(f"#explorer-{field}-error")
    assert message in problem.text_content()
    assert problem.is_visible()
    assert tab.get_attribute(f"#explorer-{field}", "aria-invalid") == "true"
    assert tab.locator("#spmd-explorer .planner-status").get_attribute("data-error") is not None
    # Putting it right clears the mark.
    tab.select_option("#explorer-preset", "0")
    assert tab.get_attribute(f"#explorer-{field}", "aria-invalid") is None


def test_a_shared_address_opens_its_question(context, site_url):
    tab = open_explorer(context, site_url)
    link = tab.locator("table.explorer-presets tbody tr a").nth(4).get_attribute("href")
    other = context.new_page()
    other.goto(f"{site_url}{PAGE}{link}", wait_until="load")
    other.wait_for_selector("#spmd-explorer .planner-status:not(:empty)")
    assert other.input_value("#explorer-param") == "x, None"
    assert other.input_value("#explorer-array0") == "16, 32 ; x, y"
    assert "P('x', None)" in other.locator("#spmd-explorer .planner-status").text_content()


def test_the_keyboard_reaches_every_control(context, site_url):
    tab = open_explorer(context, site_url)
    tab.select_option("#explorer-preset", "1")  # a matmul: every field is enabled
    tab.focus("#explorer-preset")
    reached = ["explorer-preset"]
    for _ in range(len(FIELDS) - 1):
        tab.keyboard.press("Tab")
        reached.append(tab.evaluate("document.activeElement.id"))
    assert reached == [f"explorer-{f}" for f in FIELDS]


@pytest.mark.parametrize("theme", ("light", "dark"))
@pytest.mark.parametrize("width", (390, 1280))
def test_the_explorer_stays_in_the_column_and_is_legible(context, site_url, width, theme):
    tab = open_explorer(context, site_url)
    tab.set_viewport_size({"width": width, "height": 900})
    tab.evaluate(f"document.body.dataset.theme = '{theme}'")
    found = tab.evaluate(
        """() => {
        const explorer = document.getElementById('spmd-explorer');
        const label = explorer.querySelector('svg text');
        const block = explorer.querySelector('svg rect');
        const box = explorer.querySelector('svg').getBoundingClientRect();
        return {
            overflow: document.documentElement.scrollWidth - window.innerWidth,
            right: explorer.getBoundingClientRect().right,
            page: getComputedStyle(document.body).backgroundColor,
            label: getComputedStyle(label).fill,
            labelPixels: label.getBoundingClientRect().height,
            pictureWidth: box.width,
        };
    }"""
    )
    assert found["overflow"] <= 0, found
    assert found["right"] <= width, found
    assert contrast(found["label"], found["page"]) >= 4.5, found
    assert found["labelPixels"] >= 9, found
