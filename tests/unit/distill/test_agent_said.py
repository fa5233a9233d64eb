"""What the agent told the user about a contact reaches that contact's page.

The agent's answers are never searched and are not distilled as a source, but
a sentence in them that says who a contact is ("Mum is Maria Silva, your mother
in Coimbra.") goes to the contact's page as a dated note that says whose words
it is, a few per page, and the name it used becomes a tag of the page, by which
check_notebook finds a person the contact book knows under another name.
"""

from __future__ import annotations

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.distill.agentsaid import AGENT_SAID, MAX_AGENT_SAID
from pixie.device.distill.extract import identity_statements, sentences
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import UpsertOutcome
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import ClearNote, NoteKind

MINUTE = 60_000_000
DAY = 1440 * MINUTE
START = 1_750_000_000_000_000  # 15 Jun 2025


def service(node: Node) -> NotetakingService:
    return NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),)))


async def distil(node: Node, *, everything: bool = False) -> PassReport:
    return await service(node).run_pass(everything=everything)


def answer(node: Node, i: int, text: str) -> None:
    node.log.append(
        [
            NewEvent(EventKind.AGENT_CHAT_USER, START + i * DAY, "Who is that again?"),
            NewEvent(EventKind.AGENT_CHAT_AGENT, START + i * DAY + 1, text),
        ],
        now=0,
    )


def page(node: Node, contact_id: str) -> ClearNote:
    found = [n for n in node.notebook.clear_notes(NoteKind.PERSON) if n.contact_id == contact_id]
    assert len(found) == 1
    return found[0]


def test_identity_sentences_survive_titles_and_initials() -> None:
    assert list(sentences("Ada L. is Ada Lovelace, your friend. Dr. Nowak is in. Bye!")) == [
        "Ada L. is Ada Lovelace, your friend.",
        "Dr. Nowak is in.",
        "Bye!",
    ]
    assert identity_statements(
        "Dr. Nowak is Dr. Tomasz Nowak, your dentist in Porto. Who is Ada? "
        "The last thing Ada said about it: “Ada is tired of running.” Ada is here."
    ) == [("Dr. Nowak", "Dr. Tomasz Nowak, your dentist in Porto")]


async def test_what_the_agent_said_of_a_contact_goes_to_their_page(node: Node) -> None:
    maria, _ = node.contacts.add("Maria Silva", [], now=0)
    nowak, _ = node.contacts.add("Dr. Tomasz Nowak", [], now=0)
    answer(node, 0, "Mum is Maria Silva, your mother in Coimbra.")
    answer(node, 1, "Dr. Nowak is Dr. Tomasz Nowak, your dentist in Porto.")
    answer(node, 2, "Carlos is Carlos Ruiz, your plumber in Braga.")  # nobody the book knows
    answer(node, 3, "The last thing Mum said about it: “Maria is off to Lisbon today.”")
    report = await distil(node)
    assert report.notes[UpsertOutcome.CREATED] == 2
    mum = page(node, maria)
    assert mum.title == "Maria Silva"
    assert f"- Note: {AGENT_SAID}Mum is Maria Silva, your mother in Coimbra; as of 15 Jun 2025" in (
        mum.body or ""
    )
    assert "mum" in mum.tags
    assert "dr nowak" in page(node, nowak).tags
    assert "Lisbon" not in (mum.body or "") and "Carlos" not in (mum.body or "")
    # check_notebook finds her by the name the agent used, which the book does not know
    tool = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
    found = tool.lookup({"person": "Mum", "query": "mother"})
    assert [s.note.contact_id for s in found.notes] == [maria]
    assert "your mother in Coimbra" in found.text


async def test_a_page_keeps_the_newest_few_and_a_second_pass_writes_nothing(node: Node) -> None:
    ada, _ = node.contacts.add("Ada Lovelace", ["Ada"], now=0)
    for i, alias in enumerate(["Ada", "Ada L.", "Ada", "Countess", "Lovelace", "Ada L."]):
        answer(node, i, f"{alias} is Ada Lovelace, your old friend from university in Lyon.")
    answer(node, 9, "Ada is running the Lyon marathon in April.")  # a name the book knows
    await distil(node)
    body = page(node, ada).body or ""
    said = [line for line in body.splitlines() if AGENT_SAID in line]
    assert len(said) == MAX_AGENT_SAID
    assert said[0].startswith(f"- Note: {AGENT_SAID}Ada is running the Lyon marathon in April")
    assert sum("Ada L. is" in line for line in said) == 1  # said twice, kept once
    assert "countess" not in page(node, ada).tags  # not among the newest few
    before = page(node, ada)
    again = await distil(node)
    assert again.written == 0 and page(node, ada) == before
    redo = await distil(node, everything=True)
    assert redo.written == 0 and redo.notes[UpsertOutcome.UNCHANGED] == 1


async def test_a_thread_distilled_later_keeps_the_agents_note_and_the_tag(node: Node) -> None:
    maria, _ = node.contacts.add("Maria Silva", [], now=0)
    answer(node, 0, "Mum is Maria Silva, your mother in Coimbra.")
    await distil(node)
    node.log.append(
        [
            NewEvent(
                EventKind.MESSAGE,
                START + DAY + i * MINUTE,
                text,
                contact="Maria Silva",
                thread="t-mum",
                from_me=i == 1,
            )
            for i, text in enumerate(["I made arroz de pato on Sunday.", "Save me some!"])
        ],
        now=0,
    )
    await distil(node)
    mum = page(node, maria)
    assert f"{AGENT_SAID}Mum is Maria Silva, your mother in Coimbra" in (mum.body or "")
    assert "mum" in mum.tags
    assert mum.source_ref is None  # now the page of a one-to-one thread
