-- arbiter_numerals (p001), at a quarter of the cost and now the same as SQLite's (store/db.py `numerals`).
-- It runs for every row an entries INSERT writes (the recall copy's trigger), and translate() over a UTF-8 text
-- was most of a bulk write's time in the server (55 of 88 ms for 250 entries of bench.load's, ~550 bytes each).
-- Instead of turning the punctuation into spaces and splitting, one regular expression asks for a number word
-- between two breaks: a token of the split is a number word exactly when that word stands between the text's
-- start or a break and a break or its end. A break is the punctuation p001 listed or what Python's str.split()
-- cuts at: p001's \s missed eight of those (no-break spaces, U+0085, U+001C-U+001F), so "a million\u00a0" counted
-- on SQLite and not here.
CREATE OR REPLACE FUNCTION arbiter_numerals(t text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN t IS NULL OR t = '' THEN 0
        WHEN t ~ '[0-9]' THEN 1
        WHEN lower(t) ~ ('(^|[\t\n\v\f\r\x1c-\x20\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000'
                         ',.!?;:()"/''-])(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|'
                         'fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|'
                         'seventy|eighty|ninety|hundred|thousand|million|dozen)($|[\t\n\v\f\r\x1c-\x20\u0085'
                         '\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000,.!?;:()"/''-])')
            THEN 2
        ELSE 0 END
$$;
