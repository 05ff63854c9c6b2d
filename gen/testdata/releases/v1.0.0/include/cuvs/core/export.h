#pragma once
#define CUVS_EXPORT __attribute__((visibility("default")))
