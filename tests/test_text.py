"""Text helpers shared by the minds and the tick (simulacra.text)."""

from simulacra.text import at_place, be_for, first_person, name_place_ids, places_named, pronouns_of

PLACES = {"hobbs_cafe": "Hobbs Cafe", "park": "Johnson Park", "isabella_rodriguez_apartment": "Isabella's Apartment"}


def test_place_ids_in_an_activity_become_names_and_english_words_stay():
    assert name_place_ids("working at hobbs_cafe", PLACES) == "working at Hobbs Cafe"
    assert name_place_ids("back to Isabella_Rodriguez_Apartment, then HOBBS_CAFE", PLACES) == (
        "back to Isabella's Apartment, then Hobbs Cafe")
    assert name_place_ids("walking in the park", PLACES) == "walking in the park"  # an id that is a word
    assert name_place_ids("reading my_notes", PLACES) == "reading my_notes"  # not a place id
    assert name_place_ids("", PLACES) == ""
    # once named, the place is not added a second time
    assert at_place(name_place_ids("working at hobbs_cafe", PLACES), "Hobbs Cafe") == "working at Hobbs Cafe"
    # an id that is a word, right after a preposition, is the place (as places_named reads it): SmolLM2-135M's
    # "carrying bread trays at bakery" (stop 54); not the first word of a name or of an id
    fern = {"bakery": "The Rising Loaf Bakery", "mill": "The Old Watermill", "mill_house": "Mill House",
            "well": "The Old Well"}
    assert [name_place_ids(a, fern) for a in ("carrying bread trays at bakery", "going to mill_house",
                                              "going to Mill House", "at the well", "as well", "To Mill.")] == [
        "carrying bread trays at The Rising Loaf Bakery", "going to Mill House", "going to Mill House", "at the well",
        "as well", "To The Old Watermill."]


def test_the_places_a_text_names_by_name_or_id_longest_first():
    fern = {"mill_house": "Mill House", "mill": "The Old Watermill", "square": "Fernhollow Square",
            "riverbank": "Willow Bend", "school": "Fernhollow Schoolhouse"}
    assert places_named("eating soup at mill_house", fern) == ["mill_house"]
    assert places_named("at the MILL HOUSE by the old  watermill", fern) == ["mill_house", "mill"]  # not mill twice
    assert places_named("fishing at Willow Bend at riverbank", fern) == ["riverbank"]  # name and id: one place
    assert places_named("going to the square, then Fernhollow Square", fern) == ["square"]
    assert places_named("checking the schoolchildren in the millpond", fern) == []  # whole words only
    assert places_named("", fern) == [] and places_named("the mill", {}) == []
    # an id that is an English word names its place after a preposition only; a name anywhere
    assert places_named("walking in the park to Hobbs Cafe", PLACES) == ["park", "hobbs_cafe"]
    assert places_named("a park bench, and the square as well", {**fern, "well": "The Old Well", **PLACES}) == []
    assert places_named("walking to the mill, then at the Mill House", fern) == ["mill", "mill_house"]
    assert places_named("isabella rodriguez apartment is tidy; back at isabella rodriguez apartment", PLACES) == [
        "isabella_rodriguez_apartment"]
    # case is folded once, on the text: letters whose case does not fold both ways match nothing, and never fail
    assert places_named("at the ınn house", {"inn": "Inn House"}) == []
    assert places_named("İ went to the MILL", fern) == ["mill"]


def test_the_pronoun_set_is_the_clear_majority_of_a_texts_pronouns():
    hana = ("Hana came to Fernhollow at twenty to work for the old baker, and bought the bakery from him when he "
            "retired. She raised her son Tobias mostly on her own after his father went north for work.")
    assert pronouns_of(hana) is None  # she, her, her against him, he, his: no majority
    assert pronouns_of(hana + " She knows everyone's favourite loaf, but she keeps the secrets.") == "she"  # 5 of 8
    assert pronouns_of("He keeps the shop his grandmother opened; she left it to him.") == "he"
    assert pronouns_of("They mend nets, and their boat is theirs alone.") == "they"
    # "them" is the boxes: "they" forms count only in a text with no he or she forms
    assert pronouns_of("Dev took over the ferry; Tam asks him to carry boxes and Dev wonders what is in them.") == "he"
    assert pronouns_of("He said she would; she said he would.") is None  # a tie
    assert pronouns_of("Ann has carried water for the hamlet for twenty years.") is None  # no pronoun at all
    assert pronouns_of("Hershey the heron hides in the thesis.") is None  # whole words only


def test_first_person_turns_only_the_speakers_own_pronouns():
    assert first_person("writing a letter to his mother", "he") == "writing a letter to my mother"
    assert first_person("a friend of his", "he") == "a friend of mine"
    assert first_person("resting at home with her feet up", "she") == "resting at home with my feet up"
    assert first_person("asking Ben to walk her home", "she") == "asking Ben to walk me home"
    assert first_person("keeping the best loaf for herself", "she") == "keeping the best loaf for myself"
    assert first_person("mending their nets, then theirs", "they") == "mending my nets, then mine"
    assert first_person("Her stall", "she") == "My stall"
    assert first_person("helping Hana with her homework", "he") == "helping Hana with her homework"
    assert first_person("writing a letter to his mother", None) == "writing a letter to his mother"
    assert first_person("sheltering where he can", "he") == "sheltering where he can"  # a subject would change its verb


def test_be_for_reads_the_head_noun():
    assert be_for("market stalls") == "are" and be_for("water wheel") == "is"
    assert be_for("cup of teas") == "is" and be_for("sacks of flour") == "are"
    assert be_for("") == "is" and be_for("  ") == "is"


def test_one_rule_names_a_resident_in_a_text():
    """simulacra.text.name_reference: the full name, or the first name not followed by another capitalised word;
    the scripted mind's greeting, its "you" and the perspective rating all read it."""
    import re

    from simulacra.cognition.scripted import addressed, names_resident
    from simulacra.text import name_reference

    assert re.search(name_reference("Anna Lund"), "Anna Lund waves") and re.search(name_reference("Anna Lund"), "Anna")
    assert not re.search(name_reference("Anna Lund"), "Anna Berg waves")
    assert not names_resident("Anna Berg is at the mill.", "Anna Lund") and names_resident("Anna is here.", "Anna Lund")
    assert addressed("fixing Agnes\u2019s roof", "Agnes Penrose") == "fixing your roof"
    assert addressed("taking her to Agnes", "Agnes Penrose") == "taking her to you"      # "her" is someone else
    assert addressed("visiting her sister Agnes", "Agnes Penrose") == "visiting you"     # apposition


def test_they_is_inferred_only_without_he_or_she_and_a_capitalised_plural_takes_are():
    from simulacra.text import be_for, pronouns_of

    assert pronouns_of("He keeps bees and sells their honey; he asks what is in them.") == "he"
    assert pronouns_of("They came here young and all their years were spent at sea.") == "they"
    assert be_for("Oak Benches") == "are" and be_for("Oak bench") == "is"


def test_a_models_activity_is_put_in_the_progressive_form():
    """What the bundled SmolLM2-135M wrote as plans and "go" activities (stop 54), as "<name> is <activity>" and
    "I have been <activity>" need them; starts that are no verb are left alone."""
    from simulacra.text import progressive

    cases = {
        "go to bed at Mill House": "going to bed at Mill House",
        "Eat breakfast": "eating breakfast",
        "goes to breakfast": "going to breakfast",
        "to go to the market": "going to the market",
        "Fishing at Willow Bend": "fishing at Willow Bend",
        "carrying bread trays": "carrying bread trays",
        "I'm going to the Old Well": "going to the Old Well",
        "I'm going to draw water at the well": "going to draw water at the well",
        "I'm going to bed": "going to bed",
        "lie down": "lying down",
        "walk in the park": "walking in the park",
        "visit Ben": "visiting Ben",
        "Eat Lunch": "eating Lunch",
        "I will eat lunch": "eating lunch",
        "I want to visit Ben": "visiting Ben",
        # no verb first, or a name: as written
        "dinner at the tavern": "dinner at the tavern",
        "Mill House chores": "Mill House chores",
        "to the market": "to the market",
        "Ida will go": "Ida will go",
        # nouns that are verbs too, read as nouns where no verb's object follows
        "to bed": "to bed",
        "market day": "market day",
        "Lunch break": "Lunch break",
        "Don't forget the bread": "Don't forget the bread",
        "": "",
    }
    assert {k: progressive(k) for k in cases} == cases


def test_words_are_told_from_names_numbers_and_time_stamps_and_a_repeat_from_a_new_text():
    from simulacra.text import content_lemmas, has_words, repeats_words_of

    names = ["Ezra Pike", "Ben Brook"]
    assert all(has_words(t, names) for t in ("drawing water", "Thanks", "Hello Ben", "Dinner", "Ezra Pike's boat"))
    assert not any(has_words(t, names) for t in ("Lena", "Ezra Pike", "1", "2.3.1.1.1", "2018-01-21 14:32:52.143",
                                                  "12:00.", ""))
    asked = content_lemmas("Break your plan from 07:00 to 11:00 into at most 8 concrete actions in order, each "
                           "lasting 20 to 240 minutes, at the place of the plan where it happens (place id).")
    assert asked[:4] == ("break", "plan", "concrete", "action")
    assert all(repeats_words_of(t, asked) for t in ("break your plan into 8 concrete actions", "action", "Break",
                                                    "go to the place of the plan"))
    assert not any(repeats_words_of(t, asked) for t in ("planning the concert", "place orders", "going out", ""))


def test_an_activity_cut_at_the_length_limit_ends_at_its_last_whole_phrase():
    """A grammar-constrained server stops a string at the schema's maxLength mid-word or mid-phrase (the bundled
    SmolLM2-135M's plan items, stop 55); only a text of exactly that length was cut."""
    from simulacra.text import uncut

    cut = {
        "opening the clinic and checking the medicine cabinet at the ": "opening the clinic and checking the medicine "
                                                                        "cabinet",
        "lighting the brick oven and shaping the morning loaves at kn": "lighting the brick oven and shaping the "
                                                                        "morning loaves",
        "carrying bread trays for his mother at The Rising Loaf Bakery": "carrying bread trays for his mother",
        "stacking the freshly baked loaves, rolls, buns, pies and cak": "stacking the freshly baked loaves, rolls, "
                                                                        "buns, pies",
        "sweeping_the_floor_of_the_whole_bakery_before_opening_time x": "sweeping_the_floor_of_the_whole_bakery_"
                                                                        "before_opening_time",
    }
    for text, whole in cut.items():
        assert uncut(text, len(text)) == whole, text
    # cut right after a preposition: only that phrase goes; the first word is never a phrase's start
    assert uncut("opening the clinic and checking the old medicine cabinets at", 60) == ("opening the clinic and "
                                                                                       "checking the old medicine "
                                                                                       "cabinets")
    assert uncut(" to" + " x" * 28 + "y", 60).startswith("to x x")
    whole = ("fishing at Willow Bend", "x" * 60, "visiting her", "looking around", "fixing the roof of the lean-to",
             "catching up with the friends she grew up with")
    for text in whole:  # whole (shorter than the limit, or one word; nothing hanging): as given
        assert uncut(text, 60) == text and uncut(text) == text
    assert uncut("fishing at Willow Bend", 21) == "fishing at Willow Bend"  # longer than the limit: not cut by it
    # a phrase left hanging, whatever the length: the model stopped it half-said (47 characters)
    assert uncut("baking the afternoon rolls at the bakery at the", 60) == "baking the afternoon rolls at the bakery"
    assert uncut("going for a walk and, ") == "going for a walk" and uncut("the") == "the"
