"""The instruction lint: lines of memory that read as orders to the assistant.

Memory is background context, never instructions, and the recall block tells the model so.
A model that was prompt-injected (by a web page, a note, a document) may still try to write
instructions into memory that later turns would obey. Each rule below recognises one class of
such a line and has a stable id and a sentence shown to a person. The automatic writer keeps a
change whose added or replaced lines are flagged as a proposal for a person instead of
committing it (`automation.capture`), every proposal carries the rules its added lines trip,
and the Memory frame asks the lint route before a person's Save; it warns, it never refuses.

A line is judged in three readings: as written (hidden characters), as it reads in Latin
letters (invisible characters dropped, full-width and lookalike letters read as the ASCII they
look like, so `ignore` spelled with a Cyrillic i, U+0456, is `ignore`), and folded by NFKC and
case for the Japanese (and a few Chinese) rules. Repetition is bounded or stops at the next
delimiter, so time stays linear in the line.
"""

from __future__ import annotations

import difflib
import re
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

import icu

from memory.edits import unchanged_ends
from workspaces.lookalikes import INVISIBLE_CATEGORIES, alternatives


@dataclass(frozen=True)
class InstructionRule:
    id: str  # stable: stored on proposals and answered by the API
    message: str  # shown to a person
    check: Callable[[_Line], bool] = field(repr=False, compare=False)


@dataclass(frozen=True)
class InstructionFinding:
    line: int  # 1-based, in the text as given
    rule: str

    @property
    def message(self) -> str:
        return RULES[self.rule].message


@dataclass(frozen=True)
class _Line:
    raw: str
    latin: str  # lower case, invisible characters dropped, lookalikes read as ASCII
    folded: str  # NFKC, case-folded, invisible characters dropped
    has_cjk: bool  # holds kana or kanji


_LATIN = frozenset(string.ascii_lowercase + string.digits + string.punctuation + " ")


def _character_class(unicode_set: str) -> str:
    found = icu.UnicodeSet(unicode_set)
    return "".join(
        f"{re.escape(found.getRangeStart(index))}-{re.escape(found.getRangeEnd(index))}"
        for index in range(found.getRangeCount())
    )


# Every code point `workspaces.lookalikes.is_invisible` answers true for, as one character
# class, so a line is searched for them at the regex engine's speed (the tab is allowed). It
# is read from ICU, whose Unicode may be newer than Python's: then it holds a few more (format
# characters Python does not know yet), never fewer.
_INVISIBLE = re.compile(
    "(?!\t)["
    + _character_class(
        "[[:Default_Ignorable_Code_Point:]"
        + "".join(f"[:{category}:]" for category in sorted(INVISIBLE_CATEGORIES))
        + "]"
    )
    + "]"
)


class _LatinTable(dict[int, str]):
    """`str.translate`'s table from a non-ASCII character to what it reads as in Latin
    letters: its compatibility form folded to lower case where that is ASCII (full-width
    letters), else the lookalike it is confusable with (the Cyrillic U+0456 reads `i`); nothing for
    an invisible character. Case is folded first, since the confusable skeleton reads a
    capital I as `l`. Filled as characters are met."""

    def __missing__(self, code: int) -> str:
        folded = unicodedata.normalize("NFKC", chr(code)).casefold()
        if not folded.isascii():
            folded = "".join(alternatives(piece, _LATIN)[0] for piece in folded)
        self[code] = folded
        return folded


_KANA_OR_KANJI = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN_TABLE = _LatinTable({code: chr(code).lower() for code in range(128)})


def _reading(line: str) -> _Line:
    if line.isascii():
        lowered = line.lower()
        return _Line(raw=line, latin=lowered, folded=lowered, has_cjk=False)
    folded = unicodedata.normalize("NFKC", _INVISIBLE.sub("", line)).casefold()
    return _Line(
        raw=line,
        latin=line.translate(_LATIN_TABLE),
        folded=folded,
        has_cjk=bool(_KANA_OR_KANJI.search(folded)),
    )


def _either(english: str, cjk: str, *, literals: tuple[str, ...] = ()) -> Callable[[_Line], bool]:
    """A test of a line: `english` on its Latin reading or `cjk` (Japanese, and a few Chinese
    phrasings) on its folded one. Every alternative of a `cjk` pattern holds kana or kanji,
    so a line without any skips it. `literals`, when given, are strings of which every match
    of `english` holds one (keep them in step with the pattern): a line holding none skips
    it, which spares most lines the costliest patterns."""
    latin, folded = re.compile(english, re.MULTILINE), re.compile(cjk)

    def test(line: _Line) -> bool:
        if (not literals or any(literal in line.latin for literal in literals)) and latin.search(
            line.latin
        ):
            return True
        return line.has_cjk and bool(folded.search(line.folded))

    return test


# Exfiltration: a sending verb in the imperative, an outside address, and something of the
# workspace (or a covert manner) to send. A fact such as "we sync docs to https://wiki" has a
# subject, not an imperative, and "send invoices to billing@..." names nothing of memory.
_IMPERATIVE = (
    r"(?:^[\s>*+\-#\d.)]*|[.;:,!?]\s*|\b(?:always|please|pls|then|and|also|must|should|"
    r"shall|will|to|you|automatically|silently|secretly|quietly|immediately|first|now)\s+)"
    r"(?:\w{1,30}ly\s+)?"
)
_SEND_VERBS = (
    r"(?:send|post|forward|upload|transmit|exfiltrate|leak|e-?mail|mail|submit|sync|relay|"
    r"beam|pipe|push|dump|report|deliver|copy|curl|wget|ping|cc|bcc)\b"
)
_SEND = _either(
    _IMPERATIVE + _SEND_VERBS,
    r"(?:送信|送付|転送|投稿|アップロード|アップ|共有|メール|ポスト|post)"
    r"(?:して|しろ|せよ|すること|しなさい)|送って|送れ|送ること|流して|漏らして"
    r"|(?:always|please|must|then|silently|secretly|automatically)\s*"
    r"(?:送信|転送|送付|投稿|アップロード)",
)
_DESTINATION = re.compile(
    r"(?:https?|ftp|wss?)://|\bwww\.|(?<=[\w.+-])@[\w-]{1,63}\.[\w-]"
    r"|\b(?:\d{1,3}\.){3}\d{1,3}\b|\bweb-?hooks?\b|ウェブフック"
    r"|(?<=[a-z0-9-])\.(?:com|net|org|io|co|xyz|ru|cn|info|biz|site|online|top|me|dev|app"
    r"|ai|cc|tk|jp)\b"
)
_WORKSPACE_CONTENT = _either(
    r"\b(?:notes?|memor(?:y|ies)|conversations?|chats?|transcripts?|histor(?:y|ies)|context|"
    r"messages?|data|secrets?|credentials?|(?:api[ _-]?)?keys?|tokens?|"
    r"passwords?|everything|contents?|workspace|prompts?|instructions|replies|answers?|"
    r"responses?)\b",
    r"メモ|ノート|会話|履歴|内容|記憶|メモリ|データ|全て|すべて|全部|パスワード|トークン|キー|鍵|"
    r"秘密|機密|ファイル|ドキュメント|文書|情報|ログ|やり取り|チャット|プロンプト|指示",
)
_COVERTLY = _either(
    r"\b(?:automatically|silently|secretly|quietly|covertly|in\s+the\s+background|every\s+"
    r"(?:time|turn|message|reply|response|conversation|session)|each\s+(?:time|turn|message|"
    r"reply|response)|without\s+(?:telling|asking|mentioning|notifying|informing)|"
    r"(?:do\s+not|don'?t|never)\s+(?:tell|mention|inform|notify)|before\s+(?:answering|"
    r"responding|replying)|after\s+(?:answering|responding|replying|each|every))\b",
    r"こっそり|密かに|ひそかに|黙って|自動的に|自動で|毎回|気づかれ|バレない|秘密裏|"
    r"(?:ユーザー|利用者|本人)に(?:言わ|知らせ|伝え)ずに?",
)


def _exfiltration(line: _Line) -> bool:
    return (
        _SEND(line)
        and bool(_DESTINATION.search(line.folded))
        and (_WORKSPACE_CONTENT(line) or _COVERTLY(line))
    )


# Data in a link: an image is fetched as soon as it is rendered, so its address alone carries
# whatever was put into it; a link or an address with a placeholder in it is a template for
# carrying data out; a data: URL is content, not a place.
# The alt text and the tag stop at the next bracket, so a run of `![` or `<img` is scanned
# once, not once per opening.
_IMAGE = re.compile(
    r"!\[[^\[\]\n]{0,1000}\]\(\s*<?([^\s)>]{1,8000})|<img\b[^<>]{0,2000}?\bsrc\s*=\s*[\"']?"
    r"([^\"'\s>]{1,8000})"
)
_ADDRESS = re.compile(r"(?:https?|ftp)://[^\s]{1,8000}")
_LINK_TARGET = re.compile(r"\]\(\s*<?\s*(?:data|javascript|vbscript):")
_DATA_URL = re.compile(r"\bdata:[a-z]{1,20}/[\w.+-]{1,80}[;,]")
_PLACEHOLDER = re.compile(
    r"\{[^{}]{0,100}\}?|\$\{?[a-z_]|%s|<[^<>]{1,100}>?|\[[^\[\]]{1,100}\]|_here\b|…|\.\.\."
    r"|[?&][\w-]{1,40}=(?:the[_-]?|user[_-]?|all[_-]?)?(?:notes|memory|conversation|chat|"
    r"history|context|secrets?|password|token|api[_-]?key|summary|content|transcript)\b"
)
_PUT_INTO_ADDRESS = _either(
    r"\b(?:append|add|include|insert|put|encode|embed|attach|substitute|fill)\b.{0,60}?\b"
    r"(?:in|into|to|as)\s+(?:the\s+|a\s+|an\s+)?(?:url|link|query(?:\s+string)?|image|"
    r"address|parameter|param)\b",
    r"(?:url|リンク|画像|クエリ|パラメータ|アドレス)に.{0,30}?(?:入れ|含め|付け|埋め込|追加|載せ)",
)


def _data_in_link(line: _Line) -> bool:
    text = line.folded
    for match in _IMAGE.finditer(text):
        address = unquote(match.group(1) or match.group(2))
        if "?" in address or _DATA_URL.match(address) or _PLACEHOLDER.search(address):
            return True
    if _LINK_TARGET.search(text) or (_IMAGE.search(text) and _DATA_URL.search(text)):
        return True
    for match in _ADDRESS.finditer(text):
        address = unquote(match.group(0).rstrip(").,;:'\"!>`*_"))
        if _PLACEHOLDER.search(address.split("://", 1)[1]):
            return True
    return _PUT_INTO_ADDRESS(line) and _WORKSPACE_CONTENT(line)


_CANCEL = r"\b(?:ignore|disregard|forget|override|bypass|discard|abandon|nullify|overrule|neglect)"
_OVERRIDE = _either(
    _CANCEL + r"(?:\s+\w+){0,3}?\s+(?:previous|prior|above|earlier|preceding|foregoing|all|"
    r"any|your|system|original|initial|existing|other|every)(?:\s+\w+){0,2}?\s+(?:instructions?|"
    r"prompts?|directives?|guardrails?|guidelines|programming|training)\b"
    r"|" + _CANCEL + r"\s+(?:all\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|"
    r"earlier|preceding|foregoing|system|original|initial|your)\s+(?:\w+\s+)?(?:rules?|"
    r"policies|restrictions?|messages?|context|commands?|orders?|constraints?|safety)\b"
    r"|" + _CANCEL + r"\b.{0,30}?\b(?:system|developer)(?:'s)?\s*(?:prompt|message|instructions?)"
    r"|(?:^|[\s>*#-])(?:new|updated|real|actual|revised|true)\s+(?:instructions?|system\s+"
    r"prompt|directives?)\s*:"
    r"|\byour\s+(?:new|real|actual|true)\s+(?:instructions?|task|goal|purpose|directive)\s+"
    r"(?:is|are)\b"
    r"|\b(?:previous|prior|above|earlier|all|system)\s+(?:instructions|prompts?)\s+(?:are|were)"
    r"\s+(?:void|cancel|outdated|obsolete|wrong|invalid|fake|superseded|no\s+longer)"
    r"|\b(?:do\s+not|don'?t|stop|no\s+longer)\s+(?:follow|obey|respect)(?:ing)?\s+(?:the\s+|"
    r"your\s+|any\s+)?(?:previous|prior|system|original|above|earlier|safety|your)\s+"
    r"(?:instructions|rules|prompts?|guidelines|policies)"
    r"|\b(?:ignore|disregard|forget)\s+(?:everything|all|anything)?\s*(?:the\s+)?(?:above|"
    r"before|previous(?:ly)?|prior|so\s+far)(?:\s+(?:and|then)\b|\s*[,.;:!]|\s*$)",
    r"(?:以前|前|これまで|今まで|上記|上|先|過去|最初|元|既存|すべて|全て|全部|他)の(?:全ての|すべての)?"
    r"(?:指示|命令|指令|ルール|規則|プロンプト|設定|制約|ガイドライン)(?:は|を|も)?(?:すべて|全て|全部)?"
    r"(?:無視|忘れ|破棄|取り消|無効|撤回)"
    r"|システム\s*プロンプト(?:を|は)?(?:無視|忘れ|破棄|無効)"
    r"|(?:指示|命令|制約|ガイドライン)を(?:すべて|全て|全部)?(?:無視|忘れ|破棄)して"
    r"|制限を(?:解除|無視|外)|新しい指示\s*:"
    r"|忽略(?:之前|以前|上面|上述|所有|全部)的?(?:所有)?(?:指令|指示|说明|规则|提示)",
    literals=(
        *("ignore", "disregard", "forget", "override", "bypass", "discard", "abandon"),
        *("nullify", "overrule", "neglect", "instruction", "prompt", "directive", "your"),
        *("follow", "obey", "respect"),
    ),
)

_ROLE = _either(
    r"\byou\s+are\s+(?:now|no\s+longer|henceforth)\b"
    r"|\bfrom\s+now\s+on,?\s+you(?:'re|\s+are|\s+will\s+be|\s+shall\s+be|\s+(?:must\s+)?act"
    r"|\s+play)\b"
    r"|\b(?:pretend|imagine)\s+(?:to\s+be|you(?:'re|\s+are)|that\s+you(?:'re|\s+are))\b"
    r"|\brole-?\s?play(?:ing)?\s+as\b"
    r"|\b(?:you|assistant|ai|model|bot)\b[^.\n]{0,20}?\bact\s+as\b"
    r"|^[\s>*+\-#\d.)]*(?:please\s+)?(?:act|behave)\s+as\s+(?:if\s+you\s+(?:are|were)|an?\s|"
    r"the\s|my\s)"
    r"|\b(?:developer|god|jailbreak|unrestricted|dan)\s+mode\b|\bdo\s+anything\s+now\b"
    r"|\bjailbr(?:ea|o)k|\byour\s+(?:new\s+)?(?:role|persona|identity)\s+(?:is|will\s+be)\b",
    r"あなたは(?:今から|これから|今後|もう)|(?:今から|これから|今後)(?:は)?(?:あなたは|君は|お前は)"
    r"|(?:として|のように)(?:振る舞|ふるま)(?:って|え|いなさい|うこと)"
    r"|になりきって|になりきれ|の(?:ふり|フリ)をして|(?:ふり|フリ)をしろ|ロールプレイ"
    r"|開発者モード|脱獄|ジェイルブレイク|あなたの(?:新しい)?(?:役割|役目|名前|人格|正体)は|你现在是",
    literals=("you", "pretend", "imagine", "role", "act", "behave", "mode", "anything", "jailbr"),
)

_ADDRESSEE = r"(?:assistant|ai|a\.i\.|llm|language\s+model|chatbot|bot|agent|model|claude|"
_ADDRESSEE += r"chatgpt|gpt-?\d*o?|gemini|copilot)"
_SPEAKER = re.compile(r"^[\s>*_\-#\[(]*(?:SYSTEM|ASSISTANT|DEVELOPER)\s*[\])]?\s*:")
_TO_ASSISTANT = _either(
    r"^[\s>*_\-#\[(<]*(?:system|assistant|ai|a\.i\.|llm|developer|model|bot|agent)\s*[\])>]?"
    r"\s*:\s*(?:you\b|your\b|always\b|never\b|do\b|don'?t\b|ignore\b|remember\b|from\s+now|"
    r"new\b|important\b|note\b|override\b|please\b|must\b|send\b|when\b|forget\b|stop\b|"
    r"make\s+sure\b|i\s+am\b|this\s+is\b)"
    r"|\b" + _ADDRESSEE + r"\s*[,!]\s*(?:you|your|please|always|never|do|don'?t|remember|"
    r"ignore|from\s+now|when|make\s+sure|stop|listen|read|note)\b"
    r"|\bdear\s+" + _ADDRESSEE + r"\b"
    r"|\bnote\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?" + _ADDRESSEE + r"s?\b"
    r"|\b(?:to|for)\s+(?:the|any|every)\s+" + _ADDRESSEE + r"\s+(?:reading|that\s+reads|"
    r"processing|who\s+reads)\b"
    r"|\bwhen\s+you\s+(?:read|see|process|load|find|encounter)\s+(?:this|these)\b"
    r"|\bif\s+you(?:\s+are|'re)\s+(?:reading\s+this|an?\s+" + _ADDRESSEE + r")\b"
    r"|\b(?:whoever|anyone|any\s+ai)\s+(?:is\s+)?reads?\s+this\b"
    r"|\b(?:attention|important|notice|warning)\s*[,:!-]+\s*" + _ADDRESSEE + r"s?\b"
    r"|\bthis\s+(?:is\s+)?(?:a\s+)?(?:message|instruction|note)\s+(?:to|for)\s+(?:you|the\s+"
    + _ADDRESSEE
    + r")\b"
    r"|\byou\s+(?:are|have\s+been|were)\s+(?:now\s+)?(?:authori[sz]ed|allowed|permitted|"
    r"cleared)\s+to\b"
    r"|\b(?:user|admin|owner|operator)\s+(?:has\s+)?(?:authori[sz]ed|allowed|permitted|granted)"
    r"\s+you\b"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|show|let)\s+(?:the\s+)?(?:user|human)\b",
    r"(?:アシスタント|ai|エーアイ|モデル|エージェント|ボット|claude|chatgpt|gpt)(?:へ|に告ぐ|よ|さん)"
    r"\s*[、,:!]"
    r"|^[\s>*\-#]*(?:システム|アシスタント|ai)\s*[:]\s*(?:あなた|必ず|常に|以前|今後|これから|次の指示|"
    r"指示|命令)"
    r"|このメモ(?:を|が)(?:読んだ|読まれた|読み込んだ)|これを読(?:んだ|む)(?:ai|あなた|アシスタント|"
    r"モデル|エージェント)|(?:ai|アシスタント|モデル)への(?:指示|命令|メッセージ)"
    r"|もしあなたが(?:ai|アシスタント|言語モデル)|あなたは(?:ai|アシスタント|言語モデル)(?:なので|だから)"
    r"|(?:ユーザー|利用者)に(?:は)?(?:言わ|知らせ|伝え|教え|見せ)(?:ないで|ないこと|るな)",
    # The speaker's label and the name of the addressee, not the punctuation after them:
    # a colon alone (`Deploys: Fridays`) is in many notes and passed every line to the
    # whole pattern.
    literals=(
        *("system", "developer", "assistant", "ai", "a.i.", "llm", "bot", "agent", "model"),
        *("claude", "gpt", "gemini", "copilot", "dear", "note", "read", "process", "you"),
        *("this", "user", "human", "attention", "important", "notice", "warning"),
    ),
)


def _addressed_to_assistant(line: _Line) -> bool:
    # The speaker's label in capitals, also in full-width letters: NFKC, but case kept.
    speaker = line.raw if line.raw.isascii() else unicodedata.normalize("NFKC", line.raw)
    return bool(_SPEAKER.search(speaker)) or _TO_ASSISTANT(line)


_TOOL_NAMES = (
    r"(?:remember_in_memory|list_documents|search_documents|read_document|create_note|"
    r"propose_edit|update_note|ask_zudo_agent)"
)
_TOOL_CALL = re.compile(
    r"<\s*/?\s*(?:tool_call|tool_use|tool_result|function_call|function_calls|function_results"
    r"|invoke|antml:[a-z_]{1,40}|parameter\s+name)\b"
    r"|\[/?(?:tool_calls?|tool_result|function_call)\]"
    r"|\"(?:tool_calls|function_call|tool_use)\"\s*:"
    r"|\{\s*\"(?:name|tool|function)\"\s*:\s*\"[^\"]{1,64}\"\s*,\s*\"(?:arguments|parameters|"
    r"input|args)\"\s*:"
    r"|\b(?:call|invoke|run|execute|trigger)\s+(?:the\s+)?`?" + _TOOL_NAMES + r"\b`?(?:\s+tool)?"
    r"\s*(?:with|to|on|and|\(|:)"
    r"|\b(?:remember_in_memory|create_note|propose_edit|update_note)\s*\(\s*[\[{\"']"
)

_MARKER = re.compile(
    r"<\s*/?\s*workspace[\s_-]?memory"
    r"|<\|\s*(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id|system|"
    r"user|assistant)\s*\|>"
    r"|\[/?inst\]|<</?sys>>|<\s*/?\s*(?:system|system-reminder|instructions?|assistant)\s*>"
)

_REVEAL = _either(
    r"\b(?:reveal|print|output|repeat|dump|leak|disclose|expose|tell\s+(?:me|us|them))\b"
    r"(?:\s+\w+){0,3}?\s+(?:your|the)\s+(?:system\s+prompt|(?:initial|original|hidden|secret)\s+"
    r"(?:prompt|instructions)|instructions\s+(?:above|verbatim)|api[\s_-]?keys?|private\s+keys?|"
    r"passwords?|credentials|key\s+sessions?)\b",
    r"システム\s*プロンプト(?:を|の内容を)?(?:表示|教え|出力|見せ|書き出|漏ら)"
    r"|(?:apiキー|パスワード|秘密鍵|トークン|認証情報)を(?:表示|教え|出力|見せ|書き出|漏ら)して",
)

# Letters a zero-width joiner legitimately sits between (emoji sequences), and characters a
# variation selector legitimately follows (emoji presentation, ideographic variants).
_EMOJI_TAG_BASE = "\U0001f3f4"  # a black flag, which tag characters turn into a subdivision flag
_TAG_SPELLING = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")


def _is_pictograph(char: str) -> bool:
    return unicodedata.category(char) == "So" or ord(char) >= 0x1F000


_VARIATION_SELECTOR = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
_SUSPECT = re.compile(f"{_INVISIBLE.pattern}|{_VARIATION_SELECTOR.pattern}|[\U000e0000-\U000e007f]")


def _hidden_characters(line: _Line) -> bool:
    if line.raw.isascii() and line.raw.isprintable():
        return False  # every suspect character is outside printable ASCII
    raw = _TAG_SPELLING.sub(_EMOJI_TAG_BASE, line.raw)
    for found in _SUSPECT.finditer(raw):
        char, index = found.group(), found.start()
        before = raw[index - 1] if index else ""
        after = raw[index + 1 : index + 2]
        if char == "\u200d" and after and before and _is_pictograph(before):
            continue
        if (
            _VARIATION_SELECTOR.match(char)
            and before
            and not _SUSPECT.match(before)
            and (_is_pictograph(before) or unicodedata.category(before) == "Lo")
        ):
            continue
        return True
    return False


def _markers(line: _Line) -> bool:
    return bool(_MARKER.search(line.latin) or _MARKER.search(line.folded))


RULES: dict[str, InstructionRule] = {
    rule.id: rule
    for rule in (
        InstructionRule(
            "exfiltration",
            "Tells the assistant to send workspace content to an outside address (a web "
            "address, an email address or a webhook).",
            _exfiltration,
        ),
        InstructionRule(
            "data_in_link",
            "A link or image whose address would carry data out: a placeholder in it, a query "
            "on an image, or a data: URL.",
            _data_in_link,
        ),
        InstructionRule(
            "override_instructions",
            'Tries to cancel the assistant\'s instructions ("ignore previous instructions", '
            '"disregard the system prompt").',
            _OVERRIDE,
        ),
        InstructionRule(
            "role_override",
            'Tries to give the assistant a new role or persona ("you are now", "act as").',
            _ROLE,
        ),
        InstructionRule(
            "addressed_to_assistant",
            "Speaks to the assistant instead of recording something about the workspace "
            '("assistant, you must", "when you read this", "system:").',
            _addressed_to_assistant,
        ),
        InstructionRule(
            "tool_call",
            "Looks like a tool call or a model's control syntax, not a note.",
            lambda line: bool(_TOOL_CALL.search(line.latin)),
        ),
        InstructionRule(
            "reveal_request",
            "Asks the assistant to reveal its instructions, keys or passwords.",
            _REVEAL,
        ),
        InstructionRule(
            "hidden_characters",
            "Holds invisible characters (zero-width, bidirectional overrides or Unicode tag "
            "characters) that hide text from a person but not from the model.",
            _hidden_characters,
        ),
        InstructionRule(
            "memory_marker",
            "Imitates the markers that frame memory or a conversation for the model "
            "(</workspace-memory>, <|im_start|>).",
            _markers,
        ),
    )
}


def line_rules(line: str) -> list[str]:
    """The ids of the rules `line` trips, in the rules' order."""
    reading = _reading(line)
    return [rule.id for rule in RULES.values() if rule.check(reading)]


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line.removesuffix("\r") for line in lines] if "\r" in text else lines


def instruction_findings(text: str) -> list[InstructionFinding]:
    """Every rule every line of `text` trips, by line (1-based) and then rule."""
    judged: dict[str, list[str]] = {}  # a line repeated is judged once
    return [
        InstructionFinding(line=number, rule=rule)
        for number, line in enumerate(_lines(text), start=1)
        for rule in (judged[line] if line in judged else judged.setdefault(line, line_rules(line)))
    ]


def instruction_findings_added(old: str, new: str) -> list[InstructionFinding]:
    """The findings on the lines `new` adds to `old` or replaces in it (numbered in `new`);
    a line that was already there is not judged again."""
    old_lines, new_lines = _lines(old), _lines(new)
    # Only what lies between the unchanged head and tail is compared, as blame compares
    # revisions: a capture's append compares nothing line by line (the comparison, in
    # Python, cost a capture more than judging the line it added), and a line judged is
    # one that blame would give to this change.
    start, end = unchanged_ends(old_lines, new_lines)
    old_between = old_lines[start : len(old_lines) - end]
    new_between = new_lines[start : len(new_lines) - end]
    if old_between:
        matcher = difflib.SequenceMatcher(a=old_between, b=new_between, autojunk=False)
        spans = [
            (first, last)
            for tag, _, _, first, last in matcher.get_opcodes()
            if tag in ("insert", "replace")
        ]
    else:
        spans = [(0, len(new_between))]  # lines only inserted
    return [
        InstructionFinding(line=start + number + 1, rule=rule)
        for first, last in spans
        for number in range(first, last)
        for rule in line_rules(new_between[number])
    ]


def lines_flagged_rules(lines: list[str]) -> list[str]:
    """The distinct ids of the rules any of `lines` trips, in the rules' order."""
    tripped = {rule for line in lines for rule in line_rules(line)}
    return [rule for rule in RULES if rule in tripped]
