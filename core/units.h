// Durations, byte counts and rates as a person reads them on a terminal:
// "850 us", "12.3 ms", "4.82 s", "3m05s"; "812 kB", "1.37 GB"; never "4.82e+03".
#pragma once

#include <string>

namespace poseidon {

// Three significant digits in the largest unit below 1000 of it (us, ms, s),
// then minutes and seconds ("3m05s") and hours ("2h07m").
std::string human_seconds(double seconds);
// Decimal units (B, kB, MB, GB, TB), three significant digits.
std::string human_bytes(double bytes);
// A count with three significant digits and no exponent: "0.52", "438", "12345".
std::string human_number(double value);

}  // namespace poseidon
