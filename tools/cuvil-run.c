/* placeholder */
#include <stdio.h>
int main(void) { fputs("not built yet\n", stderr); return 1; }
