// A tagged enum that is not typedef'd, with unprefixed enumerators and a
// trailing comma, and a small struct passed by value.
#pragma once

#include <stdint.h>

enum cuvsFilterType {
  NO_FILTER,
  BITSET,
  BITMAP,
};

typedef struct {
  uintptr_t addr;
  enum cuvsFilterType type;
} cuvsFilter;
