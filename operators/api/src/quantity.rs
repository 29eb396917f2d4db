//! Kubernetes quantities as whole bytes, one rule for every controller: an optional sign, a
//! decimal number (a fraction allowed), then nothing, a binary suffix (`Ki` … `Ei`), a decimal
//! one (`m`, `k`, `M` … `E`) or an exponent (`e3`); the value, computed exactly, must be a whole
//! number of bytes within i64. So `1.5Gi` and `1.5Ki` are bytes (1,610,612,736 and 1,536) and
//! `0.5` or `100m` are not. What a field means by a negative (`-1`: no limit) is the caller's.

const BINARY: &[(&str, i128)] = &[
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
];

const DECIMAL: &[(&str, i128)] = &[
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// `text` as whole bytes, or why not (a short phrase for the caller's error naming the field).
pub fn bytes(text: &str) -> Result<i64, &'static str> {
    let text = text.trim();
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    if number.is_empty() || number == "." {
        return Err("no number");
    }
    if number.matches('.').count() > 1 {
        return Err("malformed number");
    }
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let mantissa: i128 = format!("{whole}{frac}")
        .parse()
        .map_err(|_| "number too long")?;
    // value = mantissa · multiplier / (10^fraction digits · divisor), which must be whole.
    let frac_digits = u32::try_from(frac.len()).map_err(|_| "number too long")?;
    let mut divisor = 10i128.checked_pow(frac_digits).ok_or("number too long")?;
    let multiplier = match suffix {
        "" => 1,
        "m" => {
            divisor = divisor.checked_mul(1000).ok_or("number too long")?;
            1
        }
        s => match BINARY.iter().chain(DECIMAL).find(|(name, _)| *name == s) {
            Some((_, m)) => *m,
            None => {
                let exp = s.strip_prefix(['e', 'E']).ok_or("unknown suffix")?;
                let exp: u32 = exp.parse().map_err(|_| "bad exponent")?;
                10i128.checked_pow(exp).ok_or("too large")?
            }
        },
    };
    let scaled = mantissa.checked_mul(multiplier).ok_or("too large")?;
    if scaled % divisor != 0 {
        return Err("a fraction of a byte");
    }
    let bytes = scaled / divisor;
    i64::try_from(if negative { -bytes } else { bytes }).map_err(|_| "too large")
}

/// Whole bytes as a quantity in the largest binary unit that divides them, else plain bytes;
/// [`bytes`] reads it back to the same number.
pub fn of_bytes(bytes: i64) -> String {
    if bytes > 0 {
        for (suffix, m) in BINARY.iter().rev() {
            let b = i128::from(bytes);
            if b % m == 0 {
                return format!("{}{suffix}", b / m);
            }
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_quantity() {
        let rows: &[(&str, &str, Result<i64, &str>)] = &[
            ("plain bytes", "1048576", Ok(1_048_576)),
            ("a binary suffix", "512Mi", Ok(512 << 20)),
            (
                "a fraction of a binary unit that is whole bytes",
                "1.5Gi",
                Ok(3 << 29),
            ),
            ("the same, smaller", "1.5Ki", Ok(1536)),
            ("a decimal suffix", "2G", Ok(2_000_000_000)),
            ("kilo is lower case", "10k", Ok(10_000)),
            ("an exponent", "1e3", Ok(1000)),
            ("no limit, as JetStream and JWTs write it", "-1", Ok(-1)),
            ("a leading plus", "+5Mi", Ok(5 << 20)),
            ("spaces around", " 1Gi ", Ok(1 << 30)),
            ("milli that comes to whole bytes", "1000m", Ok(1)),
            ("milli that does not", "100m", Err("a fraction of a byte")),
            ("half a byte", "0.5", Err("a fraction of a byte")),
            (
                "a fraction of a kilobyte that is not whole",
                "1.0005k",
                Err("a fraction of a byte"),
            ),
            ("no number", "Gi", Err("no number")),
            ("nothing", "", Err("no number")),
            ("two points", "1.2.3Gi", Err("malformed number")),
            (
                "a suffix Kubernetes does not know",
                "1Gb",
                Err("unknown suffix"),
            ),
            ("a binary zetta", "1Zi", Err("unknown suffix")),
            ("beyond i64", "16Ei", Err("too large")),
            ("a bad exponent", "1ex", Err("bad exponent")),
        ];
        for (case, text, want) in rows {
            assert_eq!(bytes(text), *want, "{case}: {text:?}");
        }
    }

    #[test]
    fn bytes_write_back_as_quantities_that_read_the_same() {
        let rows: &[(&str, i64, &str)] = &[
            ("the largest binary unit", 3 << 30, "3Gi"),
            ("a larger count of a smaller unit", 1536 << 20, "1536Mi"),
            ("plain when no unit divides", 1000, "1000"),
            ("no limit", -1, "-1"),
            ("zero", 0, "0"),
        ];
        for (case, n, text) in rows {
            assert_eq!(of_bytes(*n), *text, "{case}");
            assert_eq!(bytes(text), Ok(*n), "{case}: reads back");
        }
    }
}
