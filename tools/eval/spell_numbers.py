"""Numbers spelled out as words: primd's analyzer version 4 (src/lexical/numbers.rs), in Python.

For the scripts that mirror primd's lexical analysis (`bm25_prefix.py --spell-numbers`,
`lexical_variants.py`'s primd analyzer): a word of primd's normaliser that holds ASCII
digits becomes its words, every other word stays as it is.

    all digits        the cardinal ("118" -> one hundred eighteen), and for four digits
                      in 1100..2099 outside 2000..2009 the year reading after it
                      ("1881" -> one thousand eight hundred eighty one eighteen eighty one)
    leading zero, or more than 12 digits: digit by digit ("007" -> zero zero seven)
    19th, 2nd         the ordinal (nineteenth, second)
    1980s, 6's        each reading's last word in the plural
    mp3               letter and digit runs apart (mp three)
    1,655,114         one number (the normaliser's words 1 655 114: a word of 1-3 digits
                      and the 3-digit words after it, up to 12 digits)

Standard library only.
"""

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"))
IRREGULAR_ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                      "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
MAX_DIGITS = 12


def _is_digits(s):
    return s != "" and all("0" <= c <= "9" for c in s)


def cardinal(n):
    """English words of 0 <= n < 10**12, no "and"."""
    if n < 20:
        return [ONES[n]]
    if n < 100:
        return [TENS[n // 10]] + ([ONES[n % 10]] if n % 10 else [])
    if n < 1000:
        return [ONES[n // 100], "hundred"] + (cardinal(n % 100) if n % 100 else [])
    for scale, name in SCALES:
        if n >= scale:
            return cardinal(n // scale) + [name] + (cardinal(n % scale) if n % scale else [])
    raise ValueError(n)


def year_reading(ndigits, n):
    """The year reading of an n of ndigits digits (a list), or None where it has none."""
    if ndigits == 4 and 1100 <= n <= 2099 and not 2000 <= n <= 2009:
        hi, lo = divmod(n, 100)
        if lo == 0:
            return cardinal(hi) + ["hundred"]
        if lo < 10:
            return cardinal(hi) + ["oh", ONES[lo]]
        return cardinal(hi) + cardinal(lo)
    return None


def readings(digits):
    if (len(digits) > 1 and digits[0] == "0") or len(digits) > MAX_DIGITS:
        return [ONES[int(c)] for c in digits]
    n = int(digits)
    year = year_reading(len(digits), n)
    return cardinal(n) + (year or [])


def ordinal(w):
    if w in IRREGULAR_ORDINALS:
        return IRREGULAR_ORDINALS[w]
    return w[:-1] + "ieth" if w.endswith("y") else w + "th"


def plural(w):
    if w.endswith("y"):
        return w[:-1] + "ies"
    return w + "es" if w.endswith(("x", "s")) else w + "s"


def spell_word(word):
    """The words of one normalised word (a list)."""
    if not any("0" <= c <= "9" for c in word):
        return [word]
    w = word.rstrip("'")
    digits = len(w) - len(w.lstrip("0123456789"))
    number, rest = w[:digits], w[digits:]
    if digits == len(w):
        return readings(number)
    if 0 < digits <= MAX_DIGITS:
        if rest in ("st", "nd", "rd", "th"):
            ws = cardinal(int(number))
            return ws[:-1] + [ordinal(ws[-1])]
        if rest in ("s", "'s"):
            n = int(number)
            ws = cardinal(n)
            out = ws[:-1] + [plural(ws[-1])]
            year = year_reading(len(number), n)
            if year:
                out += year[:-1] + [plural(year[-1])]
            return out
    out, run = [], ""
    for c in w:
        if run and ("0" <= c <= "9") != ("0" <= run[-1] <= "9"):
            out.extend(readings(run) if _is_digits(run) else [run])
            run = ""
        run += c
    if run:
        out.extend(readings(run) if _is_digits(run) else [run])
    return out


def spell(words):
    """A list of normalised words with their numbers spelled out; a number in groups of
    three digits ("1,655,114", the words 1 655 114) is read as one."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if (1 <= len(w) <= 3 and _is_digits(w) and (len(w) == 1 or w[0] != "0")
                and i + 1 < len(words) and len(words[i + 1]) == 3 and _is_digits(words[i + 1])):
            digits = w
            i += 1
            while (i < len(words) and len(digits) + 3 <= MAX_DIGITS and len(words[i]) == 3
                   and _is_digits(words[i])):
                digits += words[i]
                i += 1
            out.extend(readings(digits))
            continue
        out.extend(spell_word(w))
        i += 1
    return out


if __name__ == "__main__":
    for word, want in [
        ("1881", "one thousand eight hundred eighty one eighteen eighty one"),
        ("2007", "two thousand seven"), ("1905", "one thousand nine hundred five nineteen oh five"),
        ("007", "zero zero seven"), ("19th", "nineteenth"), ("21st", "twenty first"),
        ("1980s", "one thousand nine hundred eighties nineteen eighties"), ("6's", "sixes"),
        ("mp3", "mp three"), ("b52s", "b fifty two s"), ("tokyo", "tokyo"),
    ]:
        got = " ".join(spell_word(word))
        assert got == want, (word, got, want)
    for text, want in [
        ("over 200 000 residents", "over two hundred thousand residents"),
        ("1990 200", "one thousand nine hundred ninety nineteen ninety two hundred"),
        ("05 000", "zero five zero zero zero"),
        ("1 000 000 000 000 5", "one billion zero zero zero five"),
    ]:
        got = " ".join(spell(text.split()))
        assert got == want, (text, got, want)
    print("ok")
