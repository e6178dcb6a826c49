"""Names survive OCR's spacing repair (issue 29 part 5): pure logic of ``spacing_repair``, the
names a page knows, and the search text that keeps the unsplit forms."""

from __future__ import annotations

from laminae.schemas.search_text import component_search_text, subcomponent_search_text
from laminae.tasks.parse.ocr import page_names, repair_spacing, spacing_repair


def test_a_run_that_is_a_known_name_is_not_split():
    names = page_names(["The harbour of Marblehead, seen from the north."])
    assert "marblehead" in names
    assert repair_spacing("Marblehead", names) == "Marblehead"
    assert repair_spacing("MARBLEHEAD", names) == "MARBLEHEAD"  # its capitalised form is the name
    assert repair_spacing("marblehead", names) == "marblehead"
    assert spacing_repair("Marblehead", names).unsplit == ()
    # without the name the dictionary splits it, as before
    assert repair_spacing("Marblehead") == "Marble head"


def test_a_known_name_inside_a_run_stays_whole():
    names = page_names(["Marblehead", "Kensington Gardens"])
    assert repair_spacing("Marbleheadbasin", names) == "Marblehead basin"
    assert repair_spacing("Kensingtongardens", names) == "Kensington gardens"
    assert repair_spacing("Wheatharvestreachedrecordlevels in 1923", names) == "Wheat harvest reached record levels in 1923"


def test_the_unsplit_forms_of_a_split_run_are_kept():
    got = spacing_repair("Marbleheadbasin")
    assert got.text == "Marble head basin"
    assert got.unsplit == ("Marbleheadbasin", "Marblehead", "headbasin")
    three = spacing_repair("Kensingtongardens")
    assert three.text == "Ken sing ton gardens" and "Kensington" in three.unsplit
    assert spacing_repair("Marbleheadbasin", page_names(["Marblehead"])).unsplit == ("Marbleheadbasin",)
    assert spacing_repair("Wheat harvest reached").unsplit == ()  # nothing split, nothing kept
    assert spacing_repair("Annualrainfall2019:1,204mm").unsplit == ("Annualrainfall",)


def test_page_names_are_the_capitalised_words():
    names = page_names(["Rye from Westphalia", None, "the oven at Marblehead; a BAKERY", ""])
    assert names == frozenset({"westphalia", "marblehead", "bakery"})


def test_search_terms_follow_the_text_in_the_search_text():
    parent = {"kind": "image", "section_path": ["Harbour"], "caption": None}
    line = {"kind": "text", "text": "Marble head basin", "search_terms": ["Marbleheadbasin", "Marblehead"]}
    assert subcomponent_search_text(line, parent, "Survey") == (
        "Survey | Harbour\nMarble head basin\nMarbleheadbasin Marblehead")
    plain = {"kind": "text", "text": "Marble head basin", "search_terms": None}
    assert subcomponent_search_text(plain, parent, "Survey") == "Survey | Harbour\nMarble head basin"
    image = {"section_path": [], "text": "Image: map.", "search_terms": ["Marblehead"]}
    assert component_search_text(image, None) == "Image: map.\nMarblehead"
