"""DynamoDB's number rules, applied with Python's decimal module (an
implementation of its own, exact at any length), as the oracle for
DynamoNumber: at most 38 significant digits, magnitude 1E-130 to below
1E+126, or zero; and no digit below 1E-165, which boto3 cannot read.
Reads one candidate text per line; prints "refused" or the canonical text
(plain notation without leading or trailing zeros, "0" for zero; an integer
of more than 38 digits as d.dddE+n), after checking that boto3's
TypeDeserializer, which stream handlers written in Python use, reads that
text back to the same value."""
import sys
from decimal import Context, Decimal, InvalidOperation

from boto3.dynamodb.types import TypeDeserializer

# Python reads digits of any script and underscores; DynamoDB, ASCII digits only.
EXACT = Context(prec=100000, Emax=999999999, Emin=-999999999)
deserializer = TypeDeserializer()

for line in sys.stdin:
    text = line.rstrip("\n")
    try:
        value = EXACT.create_decimal(text)
    except InvalidOperation:
        print("refused")
        continue
    if not value.is_finite() or "_" in text or text != text.strip() or not text.isascii():
        print("refused")
        continue
    sign, digits, exponent = value.as_tuple()
    digits = list(digits)
    while digits and digits[-1] == 0:
        digits.pop()
        exponent += 1
    while digits and digits[0] == 0:
        digits.pop(0)
    if not digits:
        print("0")
        continue
    adjusted = exponent + len(digits) - 1
    # Below 1E-128 boto3's context (Emin -128, 38 digits) holds no digit under 1E-165.
    if len(digits) > 38 or not -130 <= adjusted <= 125 or exponent < -165:
        print("refused")
        continue
    if exponent > 0 and adjusted >= 38:
        # Written out, the zeros would count as digits (boto3 refuses more than 38).
        mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        canonical = ("-" if sign else "") + mantissa + "E+" + str(adjusted)
    else:
        canonical = format(Decimal((sign, tuple(digits), exponent)), "f")
    if deserializer.deserialize({"N": canonical}) != value:
        print("boto3 reads " + canonical + " as another value")
        continue
    print(canonical)
