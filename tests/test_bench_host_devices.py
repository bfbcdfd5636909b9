"""benchmarks.host_devices compares two runs' CSV tables: numbers by relative difference, timings
aside, any change of shape or text as infinitely different."""

import math

from benchmarks.host_devices import max_relative_difference

HEAD = "setting,learner,final_regret_mean,ms_per_round_mean\n"


def test_relative_difference_of_numbers_and_timings_aside():
    a = {"t.csv": HEAD + "s,eofd,10.0,0.5\ns,oful,4.0,9\n"}
    b = {"t.csv": HEAD + "s,eofd,10.000001,7.5\ns,oful,4.0,1\n"}
    assert math.isclose(max_relative_difference(a, b), 1e-6 / 10.000001)
    assert max_relative_difference(a, a) == 0.0


def test_any_change_of_shape_or_text_is_infinite():
    a = {"t.csv": HEAD + "s,eofd,10.0,0.5\n"}
    assert max_relative_difference(a, {"u.csv": a["t.csv"]}) == math.inf
    assert max_relative_difference(a, {"t.csv": a["t.csv"] + "s,oful,4.0,9\n"}) == math.inf
    assert max_relative_difference(a, {"t.csv": HEAD + "s,oful,10.0,0.5\n"}) == math.inf
