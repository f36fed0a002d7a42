#include <stdio.h>
int main(void) { puts("distzo"); return 0; }
