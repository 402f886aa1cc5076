"""DnC: tools (the conquerors), strategies (ToolsAnswer, mm-ReAct, DnC) and the teacher dialogues."""
