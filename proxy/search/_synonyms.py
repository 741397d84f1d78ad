"""Query expansion with down-weighted synonyms: generic software actions, objects and abbreviations."""

from __future__ import annotations

import functools
from collections import defaultdict

from proxy.search._stemming import stem

# Generic software action/object synonyms and abbreviations, groups split by ";" or a line end ("_" joins a
# two-word phrase). A query word adds the other members of its groups at SYNONYM_WEIGHT, so "erase" still
# finds "delete_file" (query expansion with down-weighted synonyms).
_SYNONYM_TEXT = """
list show display enumerate browse view; get fetch retrieve read view show obtain load look_up
create add new make insert generate build compose draft open
delete remove drop erase destroy purge trash discard wipe; clear empty reset wipe
update edit modify change set alter patch adjust amend revise
search find query lookup look_up locate discover seek filter
run execute start trigger launch invoke kick_off perform; stop cancel halt terminate kill abort end
save store persist remember record keep memorize; write save output put
send post publish share submit deliver notify; upload attach import ingest; download export save fetch
copy duplicate clone replicate; move relocate transfer rename; rename retitle; close resolve finish complete done
merge combine join consolidate; compare diff difference; count number tally total how_many
sort order arrange rank; summarize summary digest overview recap; convert transform translate export
check validate verify test lint audit; analyze analyse evaluate assess examine inspect
navigate go visit goto open browse; click press tap; type fill enter input; wait pause sleep delay
schedule book plan arrange; approve accept confirm authorize; reject decline deny refuse
assign allocate delegate; install setup deploy provision; restart reboot reload refresh; enable activate turn_on
disable deactivate turn_off; login signin sign_in authenticate log_in
speak aloud say voice speech tts text_to_speech synthesize; transcribe dictate speech_to_text recognize
user account member people person profile developer collaborator contributor; file document doc
folder directory dir; repo repository project codebase; message email mail inbox
image picture photo screenshot snapshot pic; chart graph plot diagram visualization visualize
table spreadsheet sheet workbook grid; database db datastore; meeting event appointment invite invitation
task todo to_do ticket chore; bug issue defect problem ticket; pipeline ci build workflow job cicd
log logs trace history audit journal; error failure exception crash fault
permission access role sharing acl grant privilege; setting config configuration option preference
vm virtual_machine instance compute host machine; website page site url web link webpage
cost price pricing billing charge fee spend; text content body; time date timezone clock
key secret credential password token; commit revision changeset; status state health
info information detail metadata property attribute describe; tab window; note memo annotation
chat conversation channel thread space; audio sound speech voice mp3 wav; video movie clip
comment reply remark feedback; label tag category; container docker pod; storage bucket blob
package library dependency module; template boilerplate sample example; schema structure field layout
column field attribute; row record entry line; entity node object; relation relationship link edge connection
observation fact memory knowledge; article post blog story news; docs documentation manual reference guide
code source snippet script; app application; org organization; env environment; auth authentication
cert certificate; msg message; img image; repo repository; db database; doc document; dir directory
info information; config configuration; pr pull_request; mr merge_request; k8s kubernetes; js javascript
ts typescript; py python; docx word_document; xlsx xls excel; pptx ppt powerpoint presentation slide
md markdown; txt text; csv comma_separated; png jpg jpeg image; mp3 wav audio; mp4 video; html webpage
"""


@functools.cache
def synonyms() -> dict[tuple[str, ...], frozenset[tuple[str, ...]]]:
    """Stemmed trigger (one word or a two-word phrase) -> stemmed members of its groups."""
    table: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)
    for line in _SYNONYM_TEXT.replace(";", "\n").strip().splitlines():
        members = {tuple(stem(w) for w in m.split("_")) for m in line.split()}
        for member in members:
            table[member] |= members - {member}
    return {k: frozenset(v) for k, v in table.items()}
