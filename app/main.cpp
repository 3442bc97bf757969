#include <iostream>
#include <string>
#include <vector>

#include "app/app.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  return servesim::app::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
