// ORIGAMI_TESTS_SANITIZED is defined when the tests are built with AddressSanitizer (GCC's
// __SANITIZE_ADDRESS__ or clang's __has_feature): the slowest checks run a reduced matrix there.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ORIGAMI_TESTS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORIGAMI_TESTS_SANITIZED 1
#endif
#endif
