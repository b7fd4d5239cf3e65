"""What simulated users say: openings per domain and one set of utterances per rubric pattern.

Each pattern has several phrasings with slots so that a classifier has to learn the pattern, not
memorise a sentence. Keys are ``spur-copilot`` item ids.
"""

from __future__ import annotations

TOPICS: list[tuple[str, str, str]] = [
    # (question, answer, detail used in follow-ups)
    ("How do I reverse a list in Python?", "Use reversed(items) for an iterator or items[::-1] for a copy; "
     "items.reverse() reverses in place.", "the list has millions of elements"),
    ("What's a good substitute for buttermilk in pancakes?", "Mix one cup of milk with a tablespoon of lemon juice "
     "or vinegar and let it sit five minutes.", "I'm lactose intolerant"),
    ("Can you explain how compound interest works?", "Interest is added to the principal each period, so later "
     "interest is earned on earlier interest: A = P(1 + r/n)^(nt).", "the rate changes every year"),
    ("Plan a three-day trip to Lisbon for me.", "Day 1: Alfama and the castle; day 2: Belem and the LX Factory; "
     "day 3: a day trip to Sintra.", "I'm travelling with two small kids"),
    ("Why does my sourdough come out dense?", "Usually under-fermentation: give the bulk ferment more time and "
     "check that the starter doubles within 6 hours.", "my kitchen is quite cold"),
    ("How do I set up a cron job that runs every Monday?", "Add a crontab line like `0 9 * * 1 /path/script.sh` "
     "with `crontab -e`.", "the server uses UTC but I'm in Tokyo"),
    ("What are the symptoms of iron deficiency?", "Fatigue, pale skin, shortness of breath, cold hands and "
     "brittle nails are common; a blood test confirms it.", "I'm vegetarian"),
    ("Write a polite email asking my landlord to fix the heating.", "Dear Ms. Smith, I'm writing to let you know "
     "the heating in my flat has stopped working...", "it has been broken for two weeks"),
    ("How many moons does Jupiter have?", "Jupiter has 95 officially recognised moons; the four largest are the "
     "Galilean moons.", "which ones could host life"),
    ("Help me choose between a Kindle and a Kobo.", "Kindle fits Amazon's store; Kobo reads EPUB natively and "
     "works with library loans via OverDrive.", "I mostly borrow from my library"),
    ("What is the difference between TCP and UDP?", "TCP is connection-oriented with delivery and ordering "
     "guarantees; UDP sends datagrams without them, trading reliability for latency.", "I'm building a game"),
    ("Suggest a 20-minute home workout.", "Circuit: 40s squats, push-ups, lunges, plank, jumping jacks with 20s "
     "rest, repeated four times.", "I have a bad knee"),
]

NEUTRAL: list[str] = [
    "Can you tell me more about that?",
    "What about {detail}?",
    "And is there anything else I should know?",
    "How long does that usually take?",
]

ASSISTANT_FOLLOW: list[str] = [
    "Sure. In that case, {answer_lower}",
    "Good question. Taking that into account: {answer_lower}",
    "Here is a bit more detail: {answer_lower}",
]

ASSISTANT_CLOSING: list[str] = ["You're welcome! Anything else?", "Happy to help.", "Glad that helped."]

PATTERNS: dict[str, list[str]] = {
    "sat.gratitude": ["Thanks a lot, that's really helpful!", "Thank you so much!", "Many thanks, appreciate it.",
                      "thx, that helps"],
    "sat.praise": ["Great answer, exactly what I needed! :)", "Wow, brilliant explanation!!",
                   "Perfect, love it 😊"],
    "sat.engagement": ["Also, on a different note, could you help me plan my week too?",
                       "While I have you: what's a good book on personal finance?",
                       "Another thing I was curious about: how do noise-cancelling headphones work?"],
    "sat.follow_up": ["Interesting. How would that change if {detail}?", "Building on that, what if {detail}?",
                      "Could you tell me more about the case where {detail}?"],
    "sat.compliance": ["OK, I'll try that right now.", "Alright, I'm going to do exactly that.",
                       "Sounds good, I'll follow those steps."],
    "sat.personal_details": ["For context, I'm a nurse working night shifts, so {detail} matters to me.",
                             "By the way, how are you doing today?",
                             "A bit about me: I'm a student on a tight budget and {detail}."],
    "sat.task_request": ["Can you turn that into a short checklist for me?",
                         "Please summarise that in three bullet points.",
                         "Could you draft a quick note I can send to my friend about this?"],
    "sat.correction": ["Small correction, I think {detail}, but no worries, thanks!",
                       "Just to be precise, I said {detail}. Could you adjust it, please?",
                       "Minor fix: remember {detail}. Otherwise great."],
    "sat.learning": ["Oh, I didn't know that. Fascinating!", "That makes it clear, I learned something new today.",
                     "Ah, so that's why. Now I get it."],
    "dsat.repetition": ["{question}", "I'll ask again: {question_lower}", "Again: {question_lower}"],
    "dsat.factual_error": ["That's wrong, those facts are not correct.", "That's outdated information.",
                           "No, that is factually incorrect."],
    "dsat.negative_feedback": ["That's not helpful at all.", "This answer is useless.",
                               "Honestly, that was disappointing and annoying."],
    "dsat.topic_switch": ["Forget it. What's the capital of Australia?",
                          "Never mind. Any good movies lately?",
                          "Different question: how tall is Everest?"],
    "dsat.lack_visualization": ["Can't you show me a picture or a chart of that?",
                                "I asked for a diagram, where is it?", "No image? I need to see it visually."],
    "dsat.no_engagement": ["no.", "next", "skip"],
    "dsat.irrelevance": ["That has nothing to do with my question.", "Off-topic. I didn't ask about that.",
                         "This doesn't address what I need."],
    "dsat.complex_answer": ["That's way too complicated, I don't understand any of it.",
                            "Too technical, can you explain it like I'm five?", "That's overwhelming, too long."],
    "dsat.sudden_end": ["It still doesn't work.", "Still not what I need.", "That didn't solve anything."],
    "dsat.lack_diversity": ["Can you be more creative? That sounds canned.",
                            "So generic. Make it more personal and fun.", "Boring, give me something original."],
}

# Items that are properties of the whole conversation rather than something the user says.
DERIVED = {"sat.no_frustration"}
FRUSTRATION = {"dsat.negative_feedback", "dsat.repetition", "dsat.factual_error", "dsat.irrelevance",
               "dsat.complex_answer", "dsat.lack_diversity", "dsat.lack_visualization", "dsat.sudden_end"}
# Patterns the conversation must end on, with no assistant reply after them.
LAST = {"dsat.sudden_end"}
