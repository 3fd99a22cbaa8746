"""The skill vocabulary shared by task files (capability profiles) and the action grammar."""

TARGETED_SKILLS = (
    "navigate",
    "pickup",
    "put",
    "open",
    "close",
    "toggle_on",
    "toggle_off",
    "slice",
    "lift",
)
PLAIN_SKILLS = ("explore", "wait", "done")
SKILLS = TARGETED_SKILLS + PLAIN_SKILLS
