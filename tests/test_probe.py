"""The ladder probe's scoring: spans and tool calls read the way a reader of the replies would."""

from mmrag.models import probe


def test_a_short_span_holding_the_answer_is_right_and_a_paragraph_is_not():
    assert probe.score_reading("The Neris river.", "Neris")[0]
    assert probe.score_reading("Answer: 3", "three")[0]
    assert probe.score_reading("Ada Quill\nShe designed it in 2031.", "Ada Quill")[0]
    assert not probe.score_reading("It was designed by a team led by the engineer Ada Quill at Helix", "Ada Quill")[0]
    assert not probe.score_reading("Bergen", "Tromsø")[0]


def test_a_tool_call_counts_when_its_json_names_the_right_tool_with_an_input():
    fenced = '```json\n{\n  "tool": "ImageQA",\n  "input": "What is in image_3.jpg?"\n}\n```'
    assert probe.score_tool_call(fenced, "ImageQA")[0]
    assert not probe.score_tool_call(fenced, "TextQA")[0]
    assert not probe.score_tool_call('{"tool": "ImageQA"}', "ImageQA")[0]  # no input
    assert not probe.score_tool_call('{"tool": "ImageQA", "input": "x"', "ImageQA")[0]  # cut off
    assert probe.first_json('say {not json} then {"tool": "TableQA", "input": "q"}') == {"tool": "TableQA",
                                                                                          "input": "q"}
